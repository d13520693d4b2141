/*
 * quorumlock's RedLock protocol (docs/algorithm.md) for SPIN: three masters,
 * two or three clients, a few attempts each, time in ticks.
 *
 * One process runs the whole world: every step is a guarded d_step (one
 * atomic transition) chosen nondeterministically: a clock tick, a client's
 * operation, a master applying a request (and its reply reaching the
 * client), a fault. Each step prints one "EV" line; `spin -t -p` on a
 * counterexample prints them in order, and faultinject/sim (ParseTrail) turns them
 * into a simulator schedule (docs/verification.md).
 *
 * Time. A tick is the unit; TTL, DRIFT, the quarantine and every expiry are
 * whole ticks, kept as ticks remaining, so the state does not grow with
 * the clock and runs are unbounded in time. A round (acquire, write-back,
 * extend) is decided within the tick it starts in (the node timeout is
 * shorter than a tick): the clock does not tick while a round is open. A
 * round reaches its deadline only after every round begun before it has
 * ended (they share one node timeout). A request may outlive its round (DELAY: a straggler, for at most TTL-1
 * ticks, or until its paused master resumes).
 *
 * Faults and options (-D): LOSS, DELAY, SPLIT, RESTARTS=n with
 * RESTART_EMPTY, RESTART_KEEP and/or RESTART_STALE (with FENCING), BOOT_STEP,
 * QUAR, LATE, MPAUSE, BACKLOG, FAST,
 * BEYOND, JUMP, STROBE, CPAUSE, FENCING, EXTENDS=n, CSKEW, WRITES, JUDGE_WRITES,
 * LOCKDELAY (with LDELAY=n).
 * Mechanisms switched off,
 * named after internal/knobs: NO_GUARD (NoReleaseGuard), NO_DRIFT (NoDrift),
 * NO_EPOCH (NoFenceEpoch), NO_WRITEBACK (NoFenceWriteBack), NO_QUARANTINE
 * (NoQuarantine), NO_VOTE_ID (NoVoteIdentity), DIAL_NOTSENT
 * (DialTimeoutNotSent), NO_LOCKDELAY (NoLockDelay), NO_RUN_STAMP
 * (NoRunStamp), WALL_UPTIME (WallUptime); NO_EXTEND_CHECK (Extend's refusal once Until has
 * passed; no knob in the code). model/check.sh lists the configurations
 * it checks and what each must find.
 */

#ifndef C
#define C 2		/* clients */
#endif
#ifndef A
#define A 1		/* attempts per client */
#endif
#define N 3		/* masters */
#define Q 2		/* quorum: N/2+1 */
#define NA (C*A)	/* attempt ids: i = c*A + a */
#ifndef TTL
#define TTL 4
#endif
#ifndef DRIFT
#define DRIFT 1		/* the drift allowance, in ticks */
#endif
#ifndef RESTARTS
#define RESTARTS 0	/* master restarts, in all */
#endif
#ifndef NPAUSE
#define NPAUSE 1	/* master pauses, in all */
#endif
#ifndef PMAX
#define PMAX (TTL-2)	/* a master pause lasts at most PMAX ticks: shorter than the TTL */
#endif
#ifndef EXTENDS
#define EXTENDS 0	/* Extends per lease */
#endif

/* LOCKDELAY (WithLockDelay): the keys are written with a time to live of
 * TTL + LDELAY ticks (acquire, extend, and the release guard, which lasts
 * the key's TTL: Mutex.keyTTL), while a lease's validity is still computed
 * from the TTL; Unlock deletes them at once. The restart quarantine lasts
 * the longest key TTL (the client's maxTTL). NO_LOCKDELAY (the NoLockDelay
 * knob): keys, extends and guards are written with the TTL alone (the
 * quarantine, computed apart, keeps TTL + LDELAY). */
#ifdef LOCKDELAY
#ifndef LDELAY
#define LDELAY 2
#endif
#define QTTL (TTL+LDELAY)
#ifdef NO_LOCKDELAY
#define KEYTTL TTL
#else
#define KEYTTL (TTL+LDELAY)
#endif
#else
#define LDELAY 0
#define QTTL TTL
#define KEYTTL TTL
#endif

#if defined(FENCING) || defined(CPAUSE)
#define WRITES		/* holders write to the protected resource */
#endif

#define CL(i) ((i)/A)
#define AT(i) ((i)%A)
#define IM(i,m) ((i)*N+(m))
#define CM(c,m) ((c)*N+(m))
#define MAX(x,y) ((x) > (y) -> (x) : (y))

/* client phases */
#define IDLE 0
#define BUSY 1		/* a round is open */
#define HOLD 2		/* the rounds are over: holding (g), or its lease ended */
#define CPAUSED 3	/* checked Valid, then stalled */

/* a request (acquire aq, write-back zq, extend eq) */
#define FLY 1		/* sent, not applied */
#define AYES 2		/* applied; its reply lost (it never counts) */

/* the client's view of an acquire call (ao), for the release plan */
#define O_NONE 0	/* never sent */
#define O_UNK 1		/* sent, no answer: its effect is unknown */
#define O_YES 2
#define O_NO 3
#define O_HELD 4	/* said yes, the vote did not count (quarantine): the key is there */

/* a release (rl) */
#define R_FLYG 1	/* on its way or waiting at a paused master; a guard if the key is not ours */
#define R_FLY 2		/* the same, no guard */
#define R_QG 3		/* failed: queued for retry (with guard) */
#define R_Q 4		/* failed: queued for retry (no guard) */

#define UNKNOWN_RUN 255

#ifdef NO_DRIFT
#define VALIDITY TTL		/* ticks a lease is valid, from its attempt's start */
#else
#define VALIDITY (TTL-DRIFT)
#endif

#ifdef NO_GUARD
#define GUARDED R_FLY
#else
#define GUARDED R_FLYG
#endif

#ifdef DIAL_NOTSENT
#define DIALED O_NONE	/* a timed-out dial taken for "never sent" */
#else
#define DIALED O_UNK
#endif

/* A property: its name printed in a trail, then asserted. */
#define PROP(msg, cond) \
	if :: !(cond) -> printf(msg); assert(cond) \
	   :: else -> skip fi

#ifdef FENCING
/* The fencing epoch reads the client's clock (microseconds), which is above
 * every token computed before (the +1 steps never catch up with it): the
 * least such value is maxc+1. CSKEW: client 1's clock lags a tick, above
 * only the tokens computed before the last tick (mlast). */
byte maxc, mlast;
#ifdef CSKEW
#define CLOCK_TICK mlast = maxc
#else
#define CLOCK_TICK skip
#endif
#else
#define CLOCK_TICK skip
#endif

/* masters */
byte kv[N];		/* lock key: 0 none, else attempt id + 1 */
byte kl[N];		/* ticks it has left */
byte gl[NA*N];		/* release guard of attempt i on m: ticks left, 0 none */
byte fv[N];		/* fencing counter, 0 absent */
#ifdef FENCING
bit fo[N];		/* the counter was written by the master's current run (its
			 * stamp is the run: runs are never reused, so the stamp
			 * equals the run read iff no restart came since) */
#ifdef RESTART_STALE
byte df[N];		/* the counter as the AOF last synced it (FSYNC); a stale
			 * restart brings it back, stamped with the old run */
#endif
#endif
#if defined(RESTART_STALE) && !defined(FENCING)
#error RESTART_STALE restores fencing counters: it needs FENCING
#endif
#if defined(PRIOR) && !defined(FENCING)
#error PRIOR is a fenced lease before the run: it needs FENCING
#endif
byte mrun[N];		/* run: 0 at start, +1 per restart */
byte yl[N];		/* ticks the run stays younger than the TTL */
#if defined(BOOT_STEP) && defined(WALL_UPTIME)
bit bs[N];		/* the run's wall clock stepped forward at boot: the uptime it
			 * reports is past the quarantine (only WallUptime reads it) */
#endif
byte md[N];		/* ticks a key expires early (the master's clock is fast) */
bit pz[N];		/* paused */
bit bf[N];		/* paused with its accept queue full: new dials time out */
byte pl[N];		/* ticks the pause may still last */
byte nrest, npz, njump;

/* attempts */
byte sl[NA];		/* DELAY: ticks its acquires may still straggle */
byte tok[NA];		/* fencing token */
byte gix[NA];		/* grant order (WRITES), 0 not granted */
byte aq[NA*N], zq[NA*N], eq[NA*N];
byte ao[NA*N];
byte rl[NA*N];
bit ra[NA*N];		/* a release of i has applied on m */

/* clients */
byte st[C], na[C];
byte ay[C], an[C];	/* acquire round: yes, no */
byte ry[C], rn[C], rf[C]; /* write-back or extend round: yes, not held, failed */
byte hi[C], pr[C];	/* fencing: highest counter read, counters present */
byte dec[C];		/* 0 undecided, 1 quorum (write-back pending), 2 failed, 3 granted */
bit aopen[C], zopen[C], eopen[C], edone[C];
bit g[C];		/* holds a lease (granted, not ended) */
byte vl[C];		/* ticks of validity left */
byte ne[C];		/* Extends made in this lease */
bit wr[C];		/* wrote (or stalled to write) in this lease */
#ifdef LOCKDELAY
byte dl[C];		/* ticks left of the lock delay after the lease's validity ended without Unlock */
#endif
byte krun[C*N], ql[C*N];	/* run last seen; ticks of quarantine left */
#ifdef BACKLOG
/* the client's pool has an idle connection to m (a call that got its reply
 * returned one; a call that timed out discarded its own). A call without
 * one dials, and a dial to a master whose accept queue is full times out. */
bit ic[C*N];
#define IC_TAKE(c,m) ic[CM(c,m)] = 0;
#define IC_PUT(c,m) ic[CM(c,m)] = 1;
#define NO_DIAL(c,m) (pz[m] && bf[m] && !ic[CM(c,m)])
#else
#define IC_TAKE(c,m)
#define IC_PUT(c,m)
#define NO_DIAL(c,m) 0
#endif

/* Open rounds are ranked by age (0 the oldest): all have the same node
 * timeout, so a round reaches its deadline only once every round begun
 * before it has ended. */
byte nopen, ark[C], zrk[C], erk[C];

/* properties */
byte ng, lasttok, maxw, wg;
#ifdef JUDGE_WRITES
int tmask;		/* tokens granted */
#endif

#define VALID(c) (g[c] && vl[c] > 0)
#define OPEN(r) r = nopen; nopen++;
#define SHIFT(c,r) \
	if :: aopen[c] && ark[c] > r -> ark[c]-- :: else -> skip fi; \
	if :: zopen[c] && zrk[c] > r -> zrk[c]-- :: else -> skip fi; \
	if :: eopen[c] && erk[c] > r -> erk[c]-- :: else -> skip fi;
#if C == 2
#define SHUT(r) SHIFT(0,r) SHIFT(1,r) nopen--; r = 0;
#define OTHER_VALID(c) (((c) != 0 && VALID(0)) || ((c) != 1 && VALID(1)))
#define QUIET_C (aopen[0] + aopen[1] + zopen[0] + zopen[1] + eopen[0] + eopen[1] == 0)
#define ALL_DONE (st[0] == IDLE && na[0] == A && st[1] == IDLE && na[1] == A)
#define FOR_C(X) X(0) X(1)
#else
#define SHUT(r) SHIFT(0,r) SHIFT(1,r) SHIFT(2,r) nopen--; r = 0;
#define OTHER_VALID(c) (((c) != 0 && VALID(0)) || ((c) != 1 && VALID(1)) || ((c) != 2 && VALID(2)))
#define QUIET_C (aopen[0] + aopen[1] + aopen[2] + zopen[0] + zopen[1] + zopen[2] + eopen[0] + eopen[1] + eopen[2] == 0)
#define ALL_DONE (st[0] == IDLE && na[0] == A && st[1] == IDLE && na[1] == A && st[2] == IDLE && na[2] == A)
#define FOR_C(X) X(0) X(1) X(2)
#endif

#if NA == 2
#define FOR_I(X) X(0) X(1)
#elif NA == 3
#define FOR_I(X) X(0) X(1) X(2)
#elif NA == 4
#define FOR_I(X) X(0) X(1) X(2) X(3)
#elif NA == 6
#define FOR_I(X) X(0) X(1) X(2) X(3) X(4) X(5)
#endif
#define FOR_M(X) X(0) X(1) X(2)
#define FOR_IM_OF(X,i) X(i,0) X(i,1) X(i,2)
#define FIM0(X) FOR_IM_OF(X,0)
#define FIM1(X) FOR_IM_OF(X,1)
#define FIM2(X) FOR_IM_OF(X,2)
#define FIM3(X) FOR_IM_OF(X,3)
#define FIM4(X) FOR_IM_OF(X,4)
#define FIM5(X) FOR_IM_OF(X,5)
#if NA == 2
#define FOR_IM(X) FIM0(X) FIM1(X)
#elif NA == 3
#define FOR_IM(X) FIM0(X) FIM1(X) FIM2(X)
#elif NA == 4
#define FOR_IM(X) FIM0(X) FIM1(X) FIM2(X) FIM3(X)
#elif NA == 6
#define FOR_IM(X) FIM0(X) FIM1(X) FIM2(X) FIM3(X) FIM4(X) FIM5(X)
#endif

/* An attempt whose acquires are all settled can never meet its guards
 * again: forget them (and the release marks), so that dead state does
 * not multiply states. */
#define ROUND_OPEN(i) (aopen[CL(i)] && na[CL(i)] == AT(i)+1)
#define NORM(i) \
	if :: !ROUND_OPEN(i) && aq[IM(i,0)] != FLY && aq[IM(i,1)] != FLY && aq[IM(i,2)] != FLY -> \
		gl[IM(i,0)] = 0; gl[IM(i,1)] = 0; gl[IM(i,2)] = 0; \
		ra[IM(i,0)] = 0; ra[IM(i,1)] = 0; ra[IM(i,2)] = 0; sl[i] = 0 \
	   :: else -> skip fi;
/* (spelt out: cpp does not expand FOR_I inside an expansion of FOR_I) */
#if NA == 2
#define NORM_ALL NORM(0) NORM(1)
#elif NA == 3
#define NORM_ALL NORM(0) NORM(1) NORM(2)
#elif NA == 4
#define NORM_ALL NORM(0) NORM(1) NORM(2) NORM(3)
#elif NA == 6
#define NORM_ALL NORM(0) NORM(1) NORM(2) NORM(3) NORM(4) NORM(5)
#endif

/* ---- the restart quarantine: the server's Info read after a vote ---- */

/* The uptime a client takes for a run it meets for the first time, as
 * ticks the run stays younger than the quarantine: a lower bound of the
 * real time since the restart, which no step of the server's wall clock
 * inflates (in the code, the server main thread's CPU time); the model
 * takes the bound's largest value, the real ticks. WALL_UPTIME (the
 * WallUptime knob): the uptime the server reports, from its wall clock,
 * which a step forward at boot (BOOT_STEP) puts past the quarantine. */
#if defined(BOOT_STEP) && defined(WALL_UPTIME)
#define YOUNG(m) (bs[m] -> 0 : yl[m])
#else
#define YOUNG(m) yl[m]
#endif

/* Client c reads master m's identity: a new run of a known server is
 * quarantined for the whole TTL from now; a server met for the first time
 * until it has been up for the TTL. */
#define OBSERVE(c,m) \
	if :: krun[CM(c,m)] != mrun[m] -> \
		if :: krun[CM(c,m)] != UNKNOWN_RUN -> ql[CM(c,m)] = QTTL \
		   :: else -> ql[CM(c,m)] = YOUNG(m) fi; \
		krun[CM(c,m)] = mrun[m] \
	   :: else -> skip fi;

/* A yes of attempt i from m: does the vote count? Sets v to O_YES or
 * O_HELD. */
#if defined(QUAR) && !defined(NO_QUARANTINE)
#ifdef NO_VOTE_ID
#define QCHECK(i,m,v) \
	if :: ql[CM(CL(i),m)] > 0 -> v = O_HELD \
	   :: else -> v = O_YES fi;
#else
#define QCHECK(i,m,v) \
	if :: pz[m] -> v = O_HELD	/* the Info read cannot answer in time */ \
	   :: else -> OBSERVE(CL(i),m) \
		if :: ql[CM(CL(i),m)] > 0 -> v = O_HELD \
		   :: else -> v = O_YES fi fi;
#endif
#else
#define QCHECK(i,m,v) v = O_YES;
#endif

/* The late client (the last one) meets the masters at its first attempt. */
#ifdef LATE
#define LATE_GUARD(i) && (CL(i) != C-1 || AT(i) != 0 || (!pz[0] && !pz[1] && !pz[2]))
#define LATE_CONTACT(i) \
	if :: CL(i) == C-1 && AT(i) == 0 -> \
		OBSERVE(C-1,0) OBSERVE(C-1,1) OBSERVE(C-1,2) \
		printf("EV meet c=%d\n", C-1) \
	   :: else -> skip fi;
#else
#define LATE_GUARD(i)
#define LATE_CONTACT(i)
#endif

/* ---- grant: the lease begins; mutual exclusion and token order ---- */

#if defined(FENCING) && defined(JUDGE_WRITES)
/* under an unsafe condition two leases may be valid at once, granted in
 * any order; fencing still needs every lease's token to be its own (the
 * resource takes equal tokens from both) */
#define TOKEN_ORDER(i) PROP("EV violate unique-tokens\n", (tmask & (1 << tok[i])) == 0); tmask = tmask | (1 << tok[i]);
#elif defined(FENCING)
#define TOKEN_ORDER(i) PROP("EV violate token-order\n", tok[i] > lasttok); lasttok = tok[i];
#else
#define TOKEN_ORDER(i)
#endif
#ifdef WRITES
#define GRANT_ORDER(i) ng++; gix[i] = ng;
#else
#define GRANT_ORDER(i)
#endif

/* JUDGE_WRITES: under a documented unsafe condition (a clock jump, a
 * pause) two leases may be valid at once; what the protected resource sees
 * is judged instead (fresh writes; with FENCING the tokens) */
#ifdef JUDGE_WRITES
#define MUTEX_CHECK(i)
#else
#define MUTEX_CHECK(i) PROP("EV violate mutual-exclusion\n", !OTHER_VALID(CL(i)));
#endif
/* lock-delay: a lease whose validity ended without Unlock (expired, or
 * lost) keeps the lock from every other client for LDELAY ticks more: no
 * grant while its delay runs (Unlock cuts it short) */
#ifdef LOCKDELAY
#if C == 2
#define OTHER_DELAYED(c) (((c) != 0 && dl[0] > 0) || ((c) != 1 && dl[1] > 0))
#else
#define OTHER_DELAYED(c) (((c) != 0 && dl[0] > 0) || ((c) != 1 && dl[1] > 0) || ((c) != 2 && dl[2] > 0))
#endif
#define DELAY_CHECK(i) PROP("EV violate lock-delay\n", !OTHER_DELAYED(CL(i)));
#define DELAY_TICK(c) DEC(dl[c]) if :: dec[c] == 3 && vl[c] == 1 -> dl[c] = LDELAY :: else -> skip fi;
#define DELAY_CLEAR(c) dl[c] = 0;
#else
#define DELAY_CHECK(i)
#define DELAY_TICK(c)
#define DELAY_CLEAR(c)
#endif
#define GRANT(i) \
	dec[CL(i)] = 3; \
	MUTEX_CHECK(i) DELAY_CHECK(i) \
	TOKEN_ORDER(i) GRANT_ORDER(i) \
	g[CL(i)] = 1; vl[CL(i)] = VALIDITY; \
	printf("EV grant c=%d i=%d tok=%d valid=%d\n", CL(i), i, tok[i], VALIDITY);

/* ---- acquire ---- */

/* a request is applied within TTL-1 ticks of its sending, or never (a
 * master paused with it counts): beyond the guard's TTL a straggler's key
 * is a documented limit (docs/algorithm.md) */
#define STRAGGLE_FOR (TTL-1)
#define SENDA(i,m) \
	if :: NO_DIAL(CL(i),m) -> ao[IM(i,m)] = DIALED; printf("EV adial i=%d m=%d\n", i, m) \
	   :: else -> IC_TAKE(CL(i),m) aq[IM(i,m)] = FLY; ao[IM(i,m)] = O_UNK fi;

#define LOCK(i) \
	:: d_step { st[CL(i)] == IDLE && na[CL(i)] == AT(i) LATE_GUARD(i) -> \
		printf("EV lock c=%d i=%d\n", CL(i), i); \
		LATE_CONTACT(i) \
		na[CL(i)]++; sl[i] = STRAGGLE_FOR; st[CL(i)] = BUSY; aopen[CL(i)] = 1; OPEN(ark[CL(i)]) \
		dec[CL(i)] = 0; ay[CL(i)] = 0; an[CL(i)] = 0; hi[CL(i)] = 0; pr[CL(i)] = 0; \
		SENDA(i,0) SENDA(i,1) SENDA(i,2) }

/* acquire.lua: refused by a guard of this value; takes a free key; yes if
 * the key holds this value already. */
#define AEFFECT(i,m) \
	if :: gl[IM(i,m)] != 0 -> t = 2 \
	   :: else -> \
		if :: kv[m] == 0 -> \
			PROP("EV violate release-guard\n", !ra[IM(i,m)]); \
			kv[m] = i+1; kl[m] = KEYTTL - md[m]; t = 1 \
		   :: kv[m] == i+1 -> t = 1 \
		   :: else -> t = 0 fi fi;

#ifdef FENCING
#ifdef CSKEW
#define EPOCH(c) (((c) == 1 -> mlast : maxc) + 1)
#else
#define EPOCH(c) (maxc + 1)
#endif
#ifndef NO_EPOCH
#define EPOCH_RULE(i) if :: pr[CL(i)] < Q -> tok[i] = MAX(tok[i], EPOCH(CL(i))) :: else -> skip fi;
#else
#define EPOCH_RULE(i)
#endif
#define TOKEN(i) tok[i] = hi[CL(i)] + 1; EPOCH_RULE(i) maxc = MAX(maxc, tok[i]);
#ifdef NO_WRITEBACK
#define ACQ_OK(i) TOKEN(i) GRANT(i)
#else
#define SENDZ(i,m) if :: NO_DIAL(CL(i),m) -> skip :: else -> IC_TAKE(CL(i),m) zq[IM(i,m)] = FLY fi;
#define ACQ_OK(i) \
	TOKEN(i) \
	dec[CL(i)] = 1; zopen[CL(i)] = 1; OPEN(zrk[CL(i)]) ry[CL(i)] = 0; rn[CL(i)] = 0; \
	printf("EV raise c=%d i=%d tok=%d\n", CL(i), i, tok[i]); \
	SENDZ(i,0) SENDZ(i,1) SENDZ(i,2)
#endif
/* The counter as the acquire reads it: one written by another run of the
 * master (it came back with a restart that kept or restored it) reads as
 * absent, so it counts as lost and the epoch rule sees it. NO_RUN_STAMP
 * (the NoRunStamp knob): every counter there reads as it is. */
#ifdef NO_RUN_STAMP
#define FREAD(m) fv[m]
#else
#define FREAD(m) (fo[m] -> fv[m] : 0)
#endif
#define READ_FENCE(i,m) \
	if :: dec[CL(i)] == 0 -> hi[CL(i)] = MAX(hi[CL(i)], FREAD(m)); pr[CL(i)] = pr[CL(i)] + (FREAD(m) > 0 -> 1 : 0) \
	   :: else -> skip fi;
#else
#define ACQ_OK(i) GRANT(i)
#define READ_FENCE(i,m)
#endif

/* The reply of attempt i's acquire on m reaches its client, round open (t:
 * 1 yes). The decision comes with the Q-th yes, or once Q yes votes are
 * impossible; the round ends when every call has answered (else at its
 * deadline, ACLOSE). */
#define ADELIVER(i,m) \
	if :: t != 1 -> ao[IM(i,m)] = O_NO \
	   :: else -> QCHECK(i,m,ao[IM(i,m)]) fi; \
	if :: ao[IM(i,m)] == O_YES -> ay[CL(i)]++ :: else -> an[CL(i)]++ fi; \
	READ_FENCE(i,m) IC_PUT(CL(i),m) \
	aq[IM(i,m)] = 0; \
	printf("EV areply i=%d m=%d o=%d\n", i, m, ao[IM(i,m)]); \
	if :: dec[CL(i)] == 0 && ay[CL(i)] >= Q -> ACQ_OK(i) \
	   :: dec[CL(i)] == 0 && an[CL(i)] > N-Q -> dec[CL(i)] = 2 \
	   :: else -> skip fi; \
	if :: dec[CL(i)] != 0 -> hi[CL(i)] = 0; pr[CL(i)] = 0 :: else -> skip fi; \
	if :: aq[IM(i,0)] == 0 && aq[IM(i,1)] == 0 && aq[IM(i,2)] == 0 -> ACLOSE_BODY(i) :: else -> skip fi;

/* The master applies the acquire; its reply reaches the client at once
 * (SPLIT: the fencing counter is read then; the reply comes later, AREPLY,
 * with other steps between, or never). */
#ifdef SPLIT
#define AAPPLY(i,m) \
	:: d_step { aq[IM(i,m)] == FLY && !pz[m] -> \
		AEFFECT(i,m) printf("EV aapply i=%d m=%d r=%d\n", i, m, t); \
		if :: ROUND_OPEN(i) -> aq[IM(i,m)] = (t == 1 -> AYES : 4 + (t == 2)) \
		   :: else -> aq[IM(i,m)] = 0 fi; \
		t = 0; NORM_ALL }
#define AREPLY(i,m) \
	:: d_step { aq[IM(i,m)] >= AYES -> \
		t = (aq[IM(i,m)] == AYES -> 1 : 0); ADELIVER(i,m) t = 0; NORM_ALL }
#else
#define AAPPLY(i,m) \
	:: d_step { aq[IM(i,m)] == FLY && !pz[m] -> \
		AEFFECT(i,m) printf("EV aapply i=%d m=%d r=%d\n", i, m, t); \
		if :: ROUND_OPEN(i) -> ADELIVER(i,m) \
		   :: else -> aq[IM(i,m)] = 0 fi; \
		t = 0; NORM_ALL }
#endif
/* applied, the reply lost (or late): the call's effect stays unknown */
#define AAPPLY_LOST(i,m) \
	:: d_step { aq[IM(i,m)] == FLY && !pz[m] -> \
		AEFFECT(i,m) printf("EV aapply i=%d m=%d r=%d lost=1\n", i, m, t); \
		if :: ROUND_OPEN(i) -> aq[IM(i,m)] = AYES :: else -> aq[IM(i,m)] = 0 fi; \
		t = 0; NORM_ALL }
/* a request lost on the way */
#define ALOST(i,m) \
	:: d_step { aq[IM(i,m)] == FLY -> aq[IM(i,m)] = 0; printf("EV alost i=%d m=%d\n", i, m); NORM_ALL }

/* ---- release ---- */

/* release.lua: compare-and-delete, else a guard for one TTL */
#define RAPPLY_EFFECT(i,m,k) \
	if :: kv[m] == i+1 -> kv[m] = 0; kl[m] = 0 \
	   :: else -> if :: (k) == R_FLYG -> gl[IM(i,m)] = KEYTTL - md[m] :: else -> skip fi fi; \
	ra[IM(i,m)] = 1;

#ifdef DIAL_NOTSENT
#define RQUEUE(i,m,k) rl[IM(i,m)] = 0; printf("EV rdrop i=%d m=%d\n", i, m)
#else
#define RQUEUE(i,m,k) rl[IM(i,m)] = (k)+2
#endif
/* A release to a running master lands at once (LOSS: it flies, and may be
 * lost); to a paused one it waits there (applied at resume); to a paused
 * one whose accept queue is full its dial times out: queued for retry. */
#ifdef LOSS
#define RRUN(i,m,k) rl[IM(i,m)] = k; printf("EV rsend i=%d m=%d\n", i, m)
#else
#define RRUN(i,m,k) RAPPLY_EFFECT(i,m,k) printf("EV rapply i=%d m=%d\n", i, m)
#endif
#define RSEND(i,m,k) \
	if :: NO_DIAL(CL(i),m) -> printf("EV rdial i=%d m=%d\n", i, m); RQUEUE(i,m,k) \
	   :: pz[m] -> IC_TAKE(CL(i),m) rl[IM(i,m)] = k; printf("EV rsend i=%d m=%d\n", i, m) \
	   :: else -> RRUN(i,m,k) fi;

/* releasePlan: a yes (counted or not) needs a release; an unknown outcome
 * a guarded one; a no, or a call never sent, none. */
#define SENDR(i,m) \
	if :: ao[IM(i,m)] == O_YES || ao[IM(i,m)] == O_HELD -> RSEND(i,m,R_FLY) \
	   :: ao[IM(i,m)] == O_UNK -> RSEND(i,m,GUARDED) \
	   :: else -> skip fi; \
	ao[IM(i,m)] = 0;
#define RELEASE_ALL(i) SENDR(i,0) SENDR(i,1) SENDR(i,2)

#define RAPPLY(i,m) \
	:: d_step { (rl[IM(i,m)] == R_FLYG || rl[IM(i,m)] == R_FLY) && !pz[m] -> \
		RAPPLY_EFFECT(i,m,rl[IM(i,m)]) rl[IM(i,m)] = 0; printf("EV rapply i=%d m=%d\n", i, m); NORM_ALL }
/* applied, the reply lost: the client retries */
#define RAPPLY_LOST(i,m) \
	:: d_step { (rl[IM(i,m)] == R_FLYG || rl[IM(i,m)] == R_FLY) && !pz[m] -> \
		RAPPLY_EFFECT(i,m,rl[IM(i,m)]) rl[IM(i,m)] = rl[IM(i,m)] + 2; \
		printf("EV rapply i=%d m=%d lost=1\n", i, m); NORM_ALL }
#define RLOST(i,m) \
	:: d_step { rl[IM(i,m)] == R_FLYG || rl[IM(i,m)] == R_FLY -> \
		rl[IM(i,m)] = rl[IM(i,m)] + 2; printf("EV rlost i=%d m=%d\n", i, m) }
/* the backlog retries until the master answers; a dial that times out
 * keeps it queued (DIAL_NOTSENT: drops it) */
#define RRETRY(i,m) \
	:: d_step { (rl[IM(i,m)] == R_QG || rl[IM(i,m)] == R_Q) && !NO_DIAL(CL(i),m) -> \
		t = rl[IM(i,m)] - 2; \
		if :: pz[m] -> IC_TAKE(CL(i),m) rl[IM(i,m)] = t; printf("EV rsend i=%d m=%d\n", i, m) \
		   :: else -> rl[IM(i,m)] = 0; RRUN(i,m,t) fi; t = 0; NORM_ALL }
#define RRETRY_DIAL(i,m) \
	:: d_step { (rl[IM(i,m)] == R_QG || rl[IM(i,m)] == R_Q) && NO_DIAL(CL(i),m) -> \
		rl[IM(i,m)] = 0; printf("EV rdrop i=%d m=%d\n", i, m) }

/* ---- the end of an attempt's rounds ---- */

#define AFTER_ROUNDS(i) \
	if :: !aopen[CL(i)] && !zopen[CL(i)] -> \
		if :: dec[CL(i)] == 3 -> st[CL(i)] = HOLD \
		   :: else -> printf("EV fail c=%d i=%d\n", CL(i), i); \
			RELEASE_ALL(i) st[CL(i)] = IDLE; dec[CL(i)] = 0; tok[i] = 0 fi \
	   :: else -> skip fi;

#ifdef DELAY
#define STRAGGLE(i,m) skip		/* it may still land */
#else
#define STRAGGLE(i,m) aq[IM(i,m)] = 0	/* no later than the deadline */
#endif
#define ACLOSE_M(i,m) \
	if :: aq[IM(i,m)] >= AYES -> aq[IM(i,m)] = 0 \
	   :: aq[IM(i,m)] == FLY && !pz[m] -> STRAGGLE(i,m) \
	   :: else -> skip fi;
#define ACLOSE_BODY(i) \
	ACLOSE_M(i,0) ACLOSE_M(i,1) ACLOSE_M(i,2) \
	aopen[CL(i)] = 0; SHUT(ark[CL(i)]) hi[CL(i)] = 0; pr[CL(i)] = 0; ay[CL(i)] = 0; an[CL(i)] = 0; \
	if :: dec[CL(i)] == 0 -> dec[CL(i)] = 2 :: else -> skip fi; \
	printf("EV close c=%d i=%d dec=%d\n", CL(i), i, dec[CL(i)]); \
	AFTER_ROUNDS(i)
/* the acquire round's deadline, with calls unanswered */
#define ACLOSE(i) :: d_step { ROUND_OPEN(i) && ark[CL(i)] == 0 -> printf("EV deadline c=%d i=%d\n", CL(i), i); ACLOSE_BODY(i) NORM_ALL }

/* ---- fencing write-back (raise_fence.lua: raise while the key is ours) ---- */

/* the raise stamps the counter with the master's current run */
#define ZEFFECT(i,m) if :: kv[m] == i+1 -> fv[m] = MAX(fv[m], tok[i]); fo[m] = 1; t = 1 :: else -> t = 0 fi;
#define ZROUND_OPEN(i) (zopen[CL(i)] && na[CL(i)] == AT(i)+1)
#define ZCLOSE_BODY(i) \
	zq[IM(i,0)] = 0; zq[IM(i,1)] = 0; zq[IM(i,2)] = 0; zopen[CL(i)] = 0; SHUT(zrk[CL(i)]) \
	ry[CL(i)] = 0; rn[CL(i)] = 0; \
	if :: dec[CL(i)] == 1 -> dec[CL(i)] = 2 :: else -> skip fi; \
	printf("EV zclose c=%d i=%d dec=%d\n", CL(i), i, dec[CL(i)]); \
	AFTER_ROUNDS(i)
/* the write-back applied, its reply at once; the round ends once all have
 * answered and the acquire round has ended (it started first) */
#define ZAPPLY(i,m) \
	:: d_step { zq[IM(i,m)] == FLY && !pz[m] -> \
		ZEFFECT(i,m) zq[IM(i,m)] = 0; IC_PUT(CL(i),m) \
		printf("EV zapply i=%d m=%d r=%d\n", i, m, t); \
		if :: t == 1 -> ry[CL(i)]++ :: else -> rn[CL(i)]++ fi; t = 0; \
		if :: dec[CL(i)] == 1 && ry[CL(i)] >= Q -> GRANT(i) \
		   :: dec[CL(i)] == 1 && rn[CL(i)] > N-Q -> dec[CL(i)] = 2 \
		   :: else -> skip fi; \
		if :: !aopen[CL(i)] && zq[IM(i,0)] == 0 && zq[IM(i,1)] == 0 && zq[IM(i,2)] == 0 -> ZCLOSE_BODY(i) \
		   :: else -> skip fi; NORM_ALL }
#define ZAPPLY_LOST(i,m) \
	:: d_step { zq[IM(i,m)] == FLY && !pz[m] -> \
		ZEFFECT(i,m) zq[IM(i,m)] = AYES; printf("EV zapply i=%d m=%d r=%d lost=1\n", i, m, t); t = 0 }
#define ZLOST(i,m) \
	:: d_step { zq[IM(i,m)] == FLY -> zq[IM(i,m)] = 0; printf("EV zlost i=%d m=%d\n", i, m) }
/* the write-back round's deadline: after the acquire round's */
#define ZCLOSE(i) :: d_step { ZROUND_OPEN(i) && zrk[CL(i)] == 0 -> printf("EV zdeadline c=%d i=%d\n", CL(i), i); ZCLOSE_BODY(i) NORM_ALL }

/* ---- holding: write, stall, extend, unlock ---- */

#if defined(FENCING) && defined(JUDGE_WRITES)
#define DOWRITE(i) \
	if :: tok[i] >= maxw -> maxw = tok[i]; printf("EV write c=%d i=%d tok=%d acc=1\n", CL(i), i, tok[i]) \
	   :: else -> printf("EV write c=%d i=%d tok=%d acc=0\n", CL(i), i, tok[i]) fi;
#elif defined(FENCING)
/* memnode.FencedStore: accepts a token at least the highest seen */
#define DOWRITE(i) \
	if :: tok[i] >= maxw -> PROP("EV violate fenced-write-order\n", gix[i] >= wg); wg = gix[i]; maxw = tok[i]; \
		printf("EV write c=%d i=%d tok=%d acc=1\n", CL(i), i, tok[i]) \
	   :: else -> PROP("EV violate newer-write-accepted\n", gix[i] != ng); \
		printf("EV write c=%d i=%d tok=%d acc=0\n", CL(i), i, tok[i]) fi;
#else
/* no fencing: a write is fresh only within its lease, before any later one */
#define DOWRITE(i) \
	PROP("EV violate fresh-writes\n", vl[CL(i)] > 0 && gix[i] == ng); \
	printf("EV write c=%d i=%d tok=0 acc=1\n", CL(i), i);
#endif

#define HOLDING(i) (st[CL(i)] == HOLD && na[CL(i)] == AT(i)+1)
#define WRITE(i) \
	:: d_step { HOLDING(i) && VALID(CL(i)) && !wr[CL(i)] -> wr[CL(i)] = 1; DOWRITE(i) }
/* the holder checks Valid, then stalls past its validity, then writes */
#define DO_CPAUSE(i) \
	:: d_step { HOLDING(i) && VALID(CL(i)) && !wr[CL(i)] -> \
		wr[CL(i)] = 1; st[CL(i)] = CPAUSED; printf("EV cpause c=%d i=%d\n", CL(i), i) }
#define PWRITE(i) \
	:: d_step { st[CL(i)] == CPAUSED && na[CL(i)] == AT(i)+1 && vl[CL(i)] == 0 -> \
		st[CL(i)] = HOLD; DOWRITE(i) }

/* Unlock: the lease ends, releases go out as the release plan says */
#define UNLOCK(i) \
	:: d_step { HOLDING(i) -> \
		g[CL(i)] = 0; DELAY_CLEAR(CL(i)) printf("EV unlock c=%d i=%d\n", CL(i), i); \
		RELEASE_ALL(i) st[CL(i)] = IDLE; dec[CL(i)] = 0; ne[CL(i)] = 0; wr[CL(i)] = 0; \
		vl[CL(i)] = 0; tok[i] = 0; gix[i] = 0; NORM_ALL }

#ifdef NO_EXTEND_CHECK
#define EXT_OK(c) 1
#else
#define EXT_OK(c) (vl[c] > 0)	/* Extend refuses once Until has passed */
#endif
#define SENDE(i,m) if :: NO_DIAL(CL(i),m) -> skip :: else -> IC_TAKE(CL(i),m) eq[IM(i,m)] = FLY fi;
#define EXTEND(i) \
	:: d_step { HOLDING(i) && g[CL(i)] && ne[CL(i)] < EXTENDS && EXT_OK(CL(i)) -> \
		ne[CL(i)]++; eopen[CL(i)] = 1; OPEN(erk[CL(i)]) edone[CL(i)] = 0; \
		ry[CL(i)] = 0; rn[CL(i)] = 0; rf[CL(i)] = 0; st[CL(i)] = BUSY; \
		printf("EV extend c=%d i=%d\n", CL(i), i); \
		SENDE(i,0) SENDE(i,1) SENDE(i,2) }
/* extend.lua: compare-and-pexpire, never creates a key */
#define EEFFECT(i,m) if :: kv[m] == i+1 -> kl[m] = KEYTTL - md[m]; t = 1 :: else -> t = 0 fi;
#define ECLOSE_BODY(i) \
	eq[IM(i,0)] = 0; eq[IM(i,1)] = 0; eq[IM(i,2)] = 0; \
	if :: !edone[CL(i)] && rn[CL(i)] > N-Q -> g[CL(i)] = 0; printf("EV lost c=%d i=%d\n", CL(i), i) :: else -> skip fi; \
	eopen[CL(i)] = 0; SHUT(erk[CL(i)]) edone[CL(i)] = 0; ry[CL(i)] = 0; rn[CL(i)] = 0; rf[CL(i)] = 0; \
	st[CL(i)] = HOLD; printf("EV eclose c=%d i=%d\n", CL(i), i);
/* the extend applied, its reply at once: a yes is a vote, which the
 * quarantine judges too; the new validity counts from the extend's start */
#define EAPPLY(i,m) \
	:: d_step { eq[IM(i,m)] == FLY && !pz[m] -> \
		EEFFECT(i,m) eq[IM(i,m)] = 0; IC_PUT(CL(i),m) \
		printf("EV eapply i=%d m=%d r=%d\n", i, m, t); \
		if :: t == 0 -> rn[CL(i)]++ \
		   :: else -> QCHECK(i,m,t) \
			if :: t == O_HELD -> rf[CL(i)]++ :: else -> ry[CL(i)]++ fi fi; \
		t = 0; \
		if :: !edone[CL(i)] && ry[CL(i)] >= Q -> \
			edone[CL(i)] = 1; \
			PROP("EV violate extend-after-end\n", VALID(CL(i))); \
			vl[CL(i)] = MAX(vl[CL(i)], VALIDITY); \
			printf("EV extended c=%d i=%d\n", CL(i), i) \
		   :: !edone[CL(i)] && rn[CL(i)] + rf[CL(i)] > N-Q -> \
			edone[CL(i)] = 1; \
			if :: rn[CL(i)] > N-Q -> g[CL(i)] = 0; printf("EV lost c=%d i=%d\n", CL(i), i) \
			   :: else -> skip fi \
		   :: else -> skip fi; \
		if :: eq[IM(i,0)] == 0 && eq[IM(i,1)] == 0 && eq[IM(i,2)] == 0 -> ECLOSE_BODY(i) :: else -> skip fi }
#define EAPPLY_LOST(i,m) \
	:: d_step { eq[IM(i,m)] == FLY && !pz[m] -> \
		EEFFECT(i,m) eq[IM(i,m)] = AYES; printf("EV eapply i=%d m=%d r=%d lost=1\n", i, m, t); t = 0 }
#define ELOST(i,m) \
	:: d_step { eq[IM(i,m)] == FLY -> eq[IM(i,m)] = 0; printf("EV elost i=%d m=%d\n", i, m) }
#define ECLOSE(i) \
	:: d_step { eopen[CL(i)] && na[CL(i)] == AT(i)+1 && erk[CL(i)] == 0 -> printf("EV edeadline c=%d i=%d\n", CL(i), i); ECLOSE_BODY(i) }

/* ---- faults ---- */

#define DROP_M(i,m) \
	if :: aq[IM(i,m)] == FLY -> aq[IM(i,m)] = 0 :: else -> skip fi; \
	if :: rl[IM(i,m)] == R_FLYG || rl[IM(i,m)] == R_FLY -> rl[IM(i,m)] = rl[IM(i,m)] + 2 :: else -> skip fi; \
	if :: zq[IM(i,m)] == FLY -> zq[IM(i,m)] = 0 :: else -> skip fi; \
	if :: eq[IM(i,m)] == FLY -> eq[IM(i,m)] = 0 :: else -> skip fi;
#define DROP_0(i) DROP_M(i,0)
#define DROP_1(i) DROP_M(i,1)
#define DROP_2(i) DROP_M(i,2)
#define FORGET_0(i) gl[IM(i,0)] = 0;
#define FORGET_1(i) gl[IM(i,1)] = 0;
#define FORGET_2(i) gl[IM(i,2)] = 0;

/* What a restart does to the fencing counter (keep: 0 empty, 1 kept, 2
 * stale): gone, kept, or the AOF's last synced value; whatever comes back
 * was written by another run. Once every restart is spent, the synced
 * copy no longer matters (forgotten, so it does not multiply states). */
#ifdef FENCING
#ifdef RESTART_STALE
#define STALE_FENCE(m) df[m]
#define SYNC_RESTART(m, keep) \
	if :: keep == 0 -> df[m] = 0 :: keep == 1 -> df[m] = fv[m] :: else -> skip fi; \
	if :: nrest == RESTARTS -> df[0] = 0; df[1] = 0; df[2] = 0 :: else -> skip fi;
#else
#define STALE_FENCE(m) 0
#define SYNC_RESTART(m, keep)
#endif
#define FENCE_RESTART(m, keep) \
	if :: keep == 0 -> fv[m] = 0 :: keep == 2 -> fv[m] = STALE_FENCE(m) :: else -> skip fi; \
	fo[m] = 0; SYNC_RESTART(m, keep)
#else
#define FENCE_RESTART(m, keep)
#endif
#if defined(BOOT_STEP) && defined(WALL_UPTIME)
#define BOOT_CLOCK(m, step) bs[m] = step;
#else
#define BOOT_CLOCK(m, step)
#endif
#if defined(BOOT_STEP) && !defined(RESTART_EMPTY)
#error BOOT_STEP comes with the restarts without persistence: it needs RESTART_EMPTY
#endif

/* A restart: requests not yet applied die with the old run's connections
 * (a release among them is retried); the proxy keeps the client's
 * connections, so nothing tells the client. keep: 0 without persistence
 * (keys, guards and counters gone), 1 with all of it (AOF, fsync always),
 * 2 stale (RESTART_STALE: the AOF lost its last writes, appendfsync
 * everysec and a host crash; the counter comes back as the AOF last
 * synced it, FSYNC; the keys and guards as lost). step (BOOT_STEP): the
 * master's wall clock steps forward right after the restart (chrony
 * makestep at boot): the uptime it reports is past the quarantine. */
#define RESTART(m, keep, step, DROPX, FORGETX) \
	:: d_step { nrest < RESTARTS -> \
		nrest++; mrun[m]++; yl[m] = QTTL; pz[m] = 0; bf[m] = 0; BOOT_CLOCK(m, step) \
		FOR_I(DROPX) \
		if :: keep != 1 -> kv[m] = 0; kl[m] = 0; FOR_I(FORGETX) :: else -> skip fi; \
		FENCE_RESTART(m, keep) \
		if :: keep == 2 -> printf("EV restart m=%d keep=0 stale=1 fence=%d\n", m, fv[m]) \
		   :: step -> printf("EV restart m=%d keep=%d step=1\n", m, keep) \
		   :: else -> printf("EV restart m=%d keep=%d\n", m, keep) fi; NORM_ALL }
#ifdef RESTART_STALE
/* the AOF's fsync (every second): the counter as it is now is durable */
#define FSYNC(m) \
	:: d_step { nrest < RESTARTS && df[m] != fv[m] -> df[m] = fv[m]; printf("EV fsync m=%d fence=%d\n", m, fv[m]) }
#endif

#define DO_MPAUSE(m) \
	:: d_step { npz < NPAUSE && !pz[m] -> npz++; pz[m] = 1; pl[m] = PMAX; printf("EV mpause m=%d\n", m) }
#define MFULL(m) \
	:: d_step { pz[m] && !bf[m] -> bf[m] = 1; printf("EV mfull m=%d\n", m) }
#define MRESUME(m) \
	:: d_step { pz[m] -> pz[m] = 0; bf[m] = 0; pl[m] = 0; printf("EV mresume m=%d\n", m) }
/* a forward jump past the TTL: every key and guard on m expires */
#define DO_JUMP(m, FORGETX) \
	:: d_step { njump < 1 -> njump++; kv[m] = 0; kl[m] = 0; FOR_I(FORGETX) printf("EV jump m=%d\n", m) }

/* ---- the clock ---- */

#define DEC(x) if :: x > 0 -> x-- :: else -> skip fi;
/* a run up for the quarantine is past it whatever its clock says */
#if defined(BOOT_STEP) && defined(WALL_UPTIME)
#define BOOT_TICK(m) if :: yl[m] == 0 -> bs[m] = 0 :: else -> skip fi;
#else
#define BOOT_TICK(m)
#endif
#define TICK_M(m) \
	if :: kv[m] != 0 -> kl[m]--; if :: kl[m] == 0 -> kv[m] = 0 :: else -> skip fi :: else -> skip fi; \
	DEC(yl[m]) BOOT_TICK(m) if :: pz[m] -> pl[m]-- :: else -> skip fi;
#define TICK_IM(i,m) \
	DEC(gl[IM(i,m)]) \
	if :: aq[IM(i,m)] == FLY && sl[i] <= 1 -> aq[IM(i,m)] = 0 :: else -> skip fi;
#define TICK_I(i) DEC(sl[i])
#define TICK_C(c) \
	DELAY_TICK(c) DEC(vl[c]) DEC(ql[CM(c,0)]) DEC(ql[CM(c,1)]) DEC(ql[CM(c,2)])
/* a release in flight to a running master lands within its tick */
#define RFLY(i,m) || ((rl[IM(i,m)] == R_FLYG || rl[IM(i,m)] == R_FLY) && !pz[m])
#define RQ_ANY(i,m) || rl[IM(i,m)] != 0
#define AQ_ANY(i,m) || aq[IM(i,m)] != 0
/* without DELAY a request queued at a master that resumed lands before
 * the clock ticks */
#ifdef DELAY
#define AFLY(i,m)
#else
#define AFLY(i,m) || (aq[IM(i,m)] == FLY && !pz[m])
#endif
/* a pause ends within PMAX ticks */
#define PAUSE_OK(m) && !(pz[m] && pl[m] == 0)

proctype world()
{
	byte t;		/* scratch, always 0 between steps */
	do
	:: d_step { QUIET_C && !(0 FOR_IM(RFLY) FOR_IM(AFLY)) FOR_M(PAUSE_OK) ->
		CLOCK_TICK;
		FOR_M(TICK_M)
		FOR_IM(TICK_IM)
		FOR_I(TICK_I)
		FOR_C(TICK_C)
		NORM_ALL
		printf("EV tick\n") }
	FOR_I(LOCK)
	FOR_IM(AAPPLY)
	FOR_I(ACLOSE)
#ifdef SPLIT
	FOR_IM(AREPLY)
#endif
	FOR_IM(RRETRY)
#ifdef LOSS
#ifndef SPLIT
	FOR_IM(AAPPLY_LOST)
#endif
	FOR_IM(ALOST)
	FOR_IM(RAPPLY_LOST)
	FOR_IM(RLOST)
#endif
#if defined(LOSS) || defined(MPAUSE)
	FOR_IM(RAPPLY)
#endif
#ifdef DIAL_NOTSENT
	FOR_IM(RRETRY_DIAL)
#endif
#if defined(FENCING) && !defined(NO_WRITEBACK)
	FOR_IM(ZAPPLY)
	FOR_I(ZCLOSE)
#ifdef LOSS
	FOR_IM(ZAPPLY_LOST)
	FOR_IM(ZLOST)
#endif
#endif
#ifdef WRITES
	FOR_I(WRITE)
#endif
	FOR_I(UNLOCK)
#ifdef CPAUSE
	FOR_I(DO_CPAUSE)
	FOR_I(PWRITE)
#endif
#if EXTENDS > 0
	FOR_I(EXTEND)
	FOR_IM(EAPPLY)
	FOR_I(ECLOSE)
#ifdef LOSS
	FOR_IM(EAPPLY_LOST)
	FOR_IM(ELOST)
#endif
#endif
#if RESTARTS > 0
#ifdef RESTART_EMPTY
	RESTART(0, 0, 0, DROP_0, FORGET_0)
	RESTART(1, 0, 0, DROP_1, FORGET_1)
	RESTART(2, 0, 0, DROP_2, FORGET_2)
#ifdef BOOT_STEP
	RESTART(0, 0, 1, DROP_0, FORGET_0)
	RESTART(1, 0, 1, DROP_1, FORGET_1)
	RESTART(2, 0, 1, DROP_2, FORGET_2)
#endif
#endif
#ifdef RESTART_KEEP
	RESTART(0, 1, 0, DROP_0, FORGET_0)
	RESTART(1, 1, 0, DROP_1, FORGET_1)
	RESTART(2, 1, 0, DROP_2, FORGET_2)
#endif
#ifdef RESTART_STALE
	RESTART(0, 2, 0, DROP_0, FORGET_0)
	RESTART(1, 2, 0, DROP_1, FORGET_1)
	RESTART(2, 2, 0, DROP_2, FORGET_2)
	FOR_M(FSYNC)
#endif
#endif
#ifdef MPAUSE
	FOR_M(DO_MPAUSE)
	FOR_M(MRESUME)
#ifdef BACKLOG
	FOR_M(MFULL)
#endif
#endif
#ifdef JUMP
	DO_JUMP(0, FORGET_0)
	DO_JUMP(1, FORGET_1)
#endif
#ifdef STROBE
	/* a strobing clock (faultinject.ClockStrobe within the allowance): at
	 * any step a master's clock flips, and the keys and guards it sets from
	 * then on expire DRIFT ticks early, or on time (the ones it set before
	 * keep their expiry) */
	:: d_step { md[0] = DRIFT - md[0]; printf("EV strobe m=0 d=%d\n", md[0]) }
	:: d_step { md[1] = DRIFT - md[1]; printf("EV strobe m=1 d=%d\n", md[1]) }
	:: d_step { md[2] = DRIFT - md[2]; printf("EV strobe m=2 d=%d\n", md[2]) }
#endif
	/* Every client is done and nothing is in flight: no key may be left
	 * (an orphan outlives its clients). */
	:: d_step { ALL_DONE && !pz[0] && !pz[1] && !pz[2] && !(0 FOR_IM(RQ_ANY)) && !(0 FOR_IM(AQ_ANY)) ->
		PROP("EV violate no-orphans\n", kv[0] == 0 && kv[1] == 0 && kv[2] == 0);
		printf("EV end\n") };
		break
	od
}

#ifdef BACKLOG
#define INIT_RUN(c) krun[CM(c,0)] = 0; krun[CM(c,1)] = 0; krun[CM(c,2)] = 0; ic[CM(c,0)] = 1; ic[CM(c,1)] = 1; ic[CM(c,2)] = 1;
#else
#define INIT_RUN(c) krun[CM(c,0)] = 0; krun[CM(c,1)] = 0; krun[CM(c,2)] = 0;
#endif

init {
	atomic {
		FOR_C(INIT_RUN)
#ifdef PRIOR
		/* the lock was used before: a lease granted token 1 wrote it back
		 * to every master, and the AOF has synced it */
		fv[0] = 1; fv[1] = 1; fv[2] = 1; fo[0] = 1; fo[1] = 1; fo[2] = 1;
#ifdef RESTART_STALE
		df[0] = 1; df[1] = 1; df[2] = 1;
#endif
		maxc = 1; lasttok = 1;
#ifdef CSKEW
		mlast = 1;
#endif
#ifdef JUDGE_WRITES
		tmask = 2;
#endif
#endif
#ifdef LATE
		krun[CM(C-1,0)] = UNKNOWN_RUN; krun[CM(C-1,1)] = UNKNOWN_RUN; krun[CM(C-1,2)] = UNKNOWN_RUN;
#endif
#ifdef LOCKDELAY
		printf("EV start N=%d C=%d A=%d TTL=%d DRIFT=%d LD=%d\n", N, C, A, TTL, DRIFT, LDELAY);
#else
		printf("EV start N=%d C=%d A=%d TTL=%d DRIFT=%d\n", N, C, A, TTL, DRIFT);
#endif
#ifdef PRIOR
		printf("EV prior tok=1\n");
#endif
#if defined(FAST) || defined(BEYOND)
		/* each master's clock: exact, or fast (keys expire early) */
#ifdef BEYOND
#define FASTBY (DRIFT+1)
#else
#define FASTBY DRIFT
#endif
		if :: md[0] = FASTBY; printf("EV fast m=0 d=%d\n", FASTBY) :: skip fi;
		if :: md[1] = FASTBY; printf("EV fast m=1 d=%d\n", FASTBY) :: skip fi;
		if :: md[2] = FASTBY; printf("EV fast m=2 d=%d\n", FASTBY) :: skip fi;
#endif
		run world()
	}
}
