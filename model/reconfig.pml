/*
 * Changing the masters online (docs/reconfig.md) for SPIN: four masters
 * (ids 0..3), two clients, one lock key, time in ticks; an operator that
 * changes the configuration (a member set and a quorum, named by an epoch)
 * while the clients lock.
 *
 * One process runs the whole world, as in redlock.pml: every step is a
 * guarded d_step chosen nondeterministically (a tick, a client's step, a
 * master applying a call, the operator's step on one master) and prints one
 * "EV" line. ParseTrail (faultinject/sim/trailreconfig.go) replays the
 * trails of the single plans on the real coordinator and memnode masters
 * (TestModelCounterexamples).
 *
 * The plan. Epoch 1 is {0,1,2}, quorum 2; master 3 is the spare.
 *   default: two single steps, add 3 then remove 2:
 *            {0,1,2} q2 -> {0,1,2,3} q3 -> {0,1,3} q2
 *            (each step: Q + Q' > |C u C'|: 2 + 3 > 4, 3 + 2 > 4)
 *   SWAP, PLAN_SWAP: one step {0,1,2} q2 -> {0,1,3} q2 (2 + 2 = 4: the
 *            quorums {1,2} and {0,3} do not meet)
 *   PLAN_JOINT: the swap through joint mode, two steps:
 *            {0,1,2} q2 -> joint({0,1,2} q2, {0,1,3} q2) -> {0,1,3} q2
 *            (a round at the joint epoch goes to {0,1,2,3} and holds when
 *            a quorum of each set said yes)
 *   PLAN_JOINT_ABORT: into joint mode and back out to the old set (the
 *            abort of a change whose new set is lost):
 *            {0,1,2} q2 -> joint({0,1,2} q2, {0,1,3} q2) -> {0,1,2} q2
 *   A commit point needs a quorum of the new epoch's sets (each, joint)
 *   and a quorum of the old epoch's old set (SETA: its only set when
 *   single): reconfig.Changer.Step's commitSet. Any two steps from one
 *   epoch meet in that set (two operators, which this model does not
 *   have, cannot both commit), and a joint client needs a quorum of it.
 *
 * Records (every configuration but SWAP). Each master holds a record: its
 * epoch (0 none) and whether the step that wrote it is sealed, with the
 * ticks since its seal. The operator's step from e to f: install f on the
 * masters of C_e u C_f in any order (a master takes f when it holds e, sealed
 * at least W ticks ago, or when it has no record and f adds it); the commit
 * point once a quorum of C_e and a quorum of C_f hold f (publishing f adds
 * nothing: a client may load any epoch a master holds already); seal f on the masters of C_f that hold it (any order, any time
 * after the commit point); the next step may begin after the commit point
 * (its installs wait for the masters). A master checks an acquire's epoch
 * against its record and refuses any other (stale or behind).
 *
 * Clients. A client's configuration is an epoch; it reloads one epoch
 * further at any moment between rounds while a later epoch exists anywhere
 * (published, or on a master: a stale reply, a source that reads the
 * masters), or never (a source that lags). An acquire goes to every member
 * of its epoch's set; each master applies it in its own step (the operator's
 * steps and the other client's interleave); the round is decided when all
 * have answered: a quorum of its set said yes, a lease valid V = TTL - 1
 * ticks; else its keys are deleted. The clock does not tick while a round is
 * open (as redlock.pml). Keys live K = TTL ticks. With EXTENDS=n client 0
 * extends its lease up to n times: at the lease's epoch, or at a later
 * epoch it has loaded (the lease moves there when a quorum of that epoch's
 * set extends it: compare-and-pexpire, never creating a key); an extend
 * that fails leaves the lease's end as it was.
 *
 * Fencing (FENCING). Each master holds the lock's counter with its stamp,
 * the epoch of the raise that wrote it (0: written before the records). An
 * acquire reads the counter of every master that passes the record check,
 * yes or no, as present when it is stamped with the round's epoch f or
 * f - 1, else as lost (0). On a quorum of yes votes the token is the
 * highest present counter + 1, or, when fewer than a quorum of counters
 * (of each set, joint) are present, the clock epoch: above every token
 * computed before. The write-back (raise_fence.lua: checks the record,
 * raises while the key is the client's, stamps the counter with f) is
 * applied at the decision, on the masters that said yes and still hold f;
 * the lease is granted when it reached a quorum, else the attempt fails and
 * is rolled back. PRIOR_FENCE: the lock was used before the records while
 * master 3 was a master (removed then without records; the plan adds it
 * back): token 1 on masters 0 and 3, stamp 0.
 *
 * Options (-D): SWAP (no records, the clients switch from the old list to
 * the new one at different times: the failure of docs/reconfig.md),
 * PLAN_SWAP (the swap as one step with records, the check and the wait:
 * the step rule broken), PLAN_JOINT (above), JOINT_ONE_SET and
 * JOINT_OLD_SET (with PLAN_JOINT: a joint round counts a quorum of the new
 * set only, or of the old set only), FENCING, PRIOR_FENCE (above),
 * NO_CFG_STAMP (with FENCING: every counter read as present whatever its
 * stamp: knobs.NoConfigStamp), NO_CFG_CHECK (records written, masters not
 * checking them: knobs.NoConfigCheck), NO_WAIT (the next step's
 * install not held for W: knobs.NoReconfigWait), ROLLBACKS=n and
 * NO_CFG_RUN (above), W=n (the wait in
 * ticks, default K), A=n (attempts per client, default 1), TTL=n (default 3),
 * EXTENDS=n (Extends per lease, default 0).
 *
 * Properties: mutual-exclusion (no grant while another client's lease is
 * valid) and, with FENCING, tokens (each lease's token above the last
 * granted lease's), printed as "EV violate NAME" and asserted.
 */

#define C 2		/* clients */
#define N 4		/* masters */
#ifndef A
#define A 1		/* attempts per client */
#endif
#ifndef TTL
#define TTL 3		/* ticks a key lives: K */
#endif
#define K TTL
#define V (TTL-1)	/* ticks a lease is valid: the drift allowance is a tick */
#ifndef EXTENDS
#define EXTENDS 0	/* Extends per lease */
#endif
#ifndef W
#define W K		/* ticks a master holds the next step's install after its seal */
#endif

/* An epoch names two sets, SETA and SETB (bit masks), with their quorums
 * QA and QB: the same set twice for a single configuration, the old and the
 * new set for a joint one. SETM is their union: the masters a round goes
 * to, and the masters that hold the epoch's record. */
#if defined(SWAP) || defined(PLAN_SWAP)
#define NE 2
#define SETA(e) ((e) == 1 -> 7 : 11)		/* {0,1,2}, {0,1,3} */
#define SETB(e) SETA(e)
#define QA(e) 2
#define QB(e) 2
#elif defined(PLAN_JOINT)
#define NE 3
#define SETA(e) ((e) == 3 -> 11 : 7)		/* {0,1,2}, joint({0,1,2}, */
#define SETB(e) ((e) == 1 -> 7 : 11)		/* {0,1,3}), {0,1,3} */
#define QA(e) 2
#define QB(e) 2
#elif defined(PLAN_JOINT_ABORT)
#define PLAN_JOINT			/* a joint round, as PLAN_JOINT's */
#define NE 3
#define SETA(e) 7				/* {0,1,2}, joint({0,1,2}, */
#define SETB(e) ((e) == 2 -> 11 : 7)		/* {0,1,3}), {0,1,2} */
#define QA(e) 2
#define QB(e) 2
#else
#define NE 3
#define SETA(e) ((e) == 1 -> 7 : ((e) == 2 -> 15 : 11))	/* {0,1,2}, {0,1,2,3}, {0,1,3} */
#define SETB(e) SETA(e)
#define QA(e) ((e) == 2 -> 3 : 2)
#define QB(e) QA(e)
#endif
#define SETM(e) (SETA(e) | SETB(e))
#define IN(e,m) ((SETM(e) >> (m)) & 1)

#ifdef SWAP
#define RECORDS 0
#define CHECKS 0
#else
#define RECORDS 1
#ifdef NO_CFG_CHECK
#define CHECKS 0
#else
#define CHECKS 1
#endif
#endif

#ifdef NO_WAIT
#define WAITED(m) 1
#else
#define WAITED(m) (sd[m] && ws[m] >= W)
#endif

/* ROLLBACKS=n: up to n times, a master restarts with the record it held
 * before its last install (an older snapshot or AOF, a replica that missed
 * the last write), sealed long ago. The run stamp (config_check.lua,
 * reconfig.lua) makes such a record count as none: refused by the check,
 * not a holder at a commit point, not a member's record at an install
 * (only the install of a master the step adds goes over it, and only over
 * an older epoch). NO_CFG_RUN (knobs.NoConfigRun): the rolled-back record
 * counts as it is. */
#ifdef ROLLBACKS
#ifdef NO_CFG_RUN
#define REC(m) re[m]
#else
#define REC(m) (lo[m] -> 0 : re[m])
#endif
#else
#define REC(m) re[m]
#if defined(NO_CFG_RUN)
#error NO_CFG_RUN is about rolled-back records: it needs ROLLBACKS
#endif
#endif

/* A property: its name printed in a trail, then asserted. */
#define PROP(msg, cond) \
	if :: !(cond) -> printf(msg); assert(cond) \
	   :: else -> skip fi

/* masters */
byte kv[N];		/* lock key: 0 none, else client + 1 */
byte kl[N];		/* ticks it has left */
byte re[N];		/* record: epoch, 0 none */
bit sd[N];		/* the record's step is sealed */
byte ws[N];		/* ticks since the seal (up to W) */
#ifdef ROLLBACKS
byte pr[N];		/* the record before the last install (what an older snapshot holds) */
bit lo[N];		/* the record was written by another run of the server */
byte nrb;		/* rollbacks so far */
#endif

/* operator */
byte os;		/* the step's target epoch f */
bit com;		/* f's commit point has passed */
byte hi;		/* the highest epoch on any master or published */

/* clients */
byte ce[C];		/* epoch loaded */
byte na[C];		/* attempts made */
bit op[C];		/* a round is open */
byte pd[C];		/* masters that have not answered the round (bit mask) */
byte ay[C];		/* yes votes */
byte ym[C];		/* masters that said yes (bit mask) */
bit g[C];		/* holds a lease */
byte vl[C];		/* ticks of validity left */
bit xk[C];		/* the open round is an extend */
byte xe[C];		/* the open round's epoch */
byte le[C];		/* the lease's epoch: its last successful round's */
byte nx[C];		/* Extends made in this lease */

#ifdef FENCING
/* fencing (docs/reconfig.md, "Fence tokens across the change") */
byte fv[N];		/* the lock's fencing counter, 0 absent */
byte fe[N];		/* its stamp: the epoch of the raise that wrote it (0: before the records) */
byte hc[C];		/* the open round: highest present counter read */
byte pm[C];		/* the open round: masters whose counter read as present (bit mask) */
byte maxc;		/* the highest token computed: the clock epoch is above it (maxc + 1) */
byte lasttok;		/* the token of the last lease granted */
byte tk;		/* scratch: the token being computed (0 between steps) */
#endif

#define OTHER_VALID(c) (((c) != 0 && g[0]) || ((c) != 1 && g[1]))
#define NBITS(x) (((x) & 1) + (((x) >> 1) & 1) + (((x) >> 2) & 1) + (((x) >> 3) & 1))
/* masters of set s holding epoch f */
#define HOLDS(m,f) ((REC(m) == (f)) -> (1 << (m)) : 0)
#define HOLDERS(f) (HOLDS(0,f) | HOLDS(1,f) | HOLDS(2,f) | HOLDS(3,f))
/* the masters in mask x are a quorum of each of epoch e's sets (a master
 * in both counts for both) */
#define QUORUM(x,e) (NBITS((x) & SETA(e)) >= QA(e) && NBITS((x) & SETB(e)) >= QB(e))

/* The round's yes votes are a quorum at its epoch. Single plans: the count
 * (each epoch has one set). PLAN_JOINT: the masters that said yes (ym, an
 * extend's yes included), a quorum of each set; JOINT_ONE_SET: a quorum of
 * the new set only (SETB), the old one not counted; JOINT_OLD_SET: of the
 * old set only (SETA). The commit points are unchanged by either. */
#if defined(PLAN_JOINT) && defined(JOINT_ONE_SET)
#define QOK(c) (NBITS(ym[c] & SETB(xe[c])) >= QB(xe[c]))
#elif defined(PLAN_JOINT) && defined(JOINT_OLD_SET)
#define QOK(c) (NBITS(ym[c] & SETA(xe[c])) >= QA(xe[c]))
#elif defined(PLAN_JOINT)
#define QOK(c) QUORUM(ym[c], xe[c])
#else
#define QOK(c) (ay[c] >= QA(xe[c]))
#endif
#if (defined(JOINT_ONE_SET) || defined(JOINT_OLD_SET)) && !defined(PLAN_JOINT)
#error JOINT_ONE_SET and JOINT_OLD_SET change the joint round: they need PLAN_JOINT
#endif
#ifdef PLAN_JOINT
#define XYES(c,m) ym[c] = ym[c] | (1 << m);
#else
#define XYES(c,m)
#endif

#define MAX(a,b) ((a) > (b) -> (a) : (b))
/* the masters a write-back raises (with FENCING): raise_fence.lua checks
 * the record too, and raises only while the key is the client's (the
 * masters that said yes: no key expires while a round is open) */
#define RZ(c) (CHECKS -> (ym[c] & HOLDERS(xe[c])) : ym[c])
#ifdef FENCING
/* A counter as an acquire at epoch f reads it: present when stamped f or
 * f - 1, else lost (0). NO_CFG_STAMP (knobs.NoConfigStamp, planned): every
 * counter is present whatever its stamp. */
#ifdef NO_CFG_STAMP
#define PRESENT(m,f) (fv[m] > 0)
#else
#define PRESENT(m,f) (fv[m] > 0 && (fe[m] == (f) || fe[m] + 1 == (f)))
#endif
/* acquire_fenced.lua returns the counter with its vote, yes or no */
#define FREAD(c,m) \
	if :: PRESENT(m, xe[c]) -> hc[c] = MAX(hc[c], fv[m]); pm[c] = pm[c] | (1 << m) :: else -> skip fi;
#define RAISE(c,m) if :: (RZ(c) >> m) & 1 -> fv[m] = MAX(fv[m], tk); fe[m] = xe[c] :: else -> skip fi;
/* the token: the highest present counter + 1, or, with fewer than a quorum
 * present (of each set, joint), the clock epoch, above every token computed
 * before; then the write-back (raise and stamp), applied at once; the lease
 * needs it on a quorum (RAISED) */
#define FTOKEN(c) \
	tk = hc[c] + 1; \
	if :: !QUORUM(pm[c], xe[c]) -> tk = MAX(tk, maxc + 1) :: else -> skip fi; \
	maxc = MAX(maxc, tk); \
	printf("EV token c=%d e=%d tok=%d present=%d\n", c, xe[c], tk, pm[c]); \
	RAISE(c,0) RAISE(c,1) RAISE(c,2) RAISE(c,3)
#define RAISED(c) QUORUM(RZ(c), xe[c])
#define TOKENS PROP("EV violate tokens\n", tk > lasttok); lasttok = tk;
#define FRESET(c) hc[c] = 0; pm[c] = 0; tk = 0;
#else
#if defined(NO_CFG_STAMP) || defined(PRIOR_FENCE)
#error NO_CFG_STAMP and PRIOR_FENCE are about fencing counters: they need FENCING
#endif
#define FREAD(c,m)
#define FTOKEN(c)
#define RAISED(c) 1
#define TOKENS
#define FRESET(c)
#endif

/* ---- clients ---- */

#define LOCK(c) \
	:: d_step { !op[c] && !g[c] && na[c] < A -> \
		na[c]++; op[c] = 1; xk[c] = 0; xe[c] = ce[c]; pd[c] = SETM(ce[c]); ay[c] = 0; ym[c] = 0; \
		printf("EV lock c=%d e=%d\n", c, ce[c]) }

/* Extend (extend.lua: compare-and-pexpire, never creating a key) at the
 * lease's epoch, or at the epoch loaded since (after a stale reply: the
 * lease moves to that epoch when a quorum of its set extends it) */
#define EXTEND(c) \
	:: d_step { !op[c] && g[c] && nx[c] < EXTENDS -> \
		nx[c]++; op[c] = 1; xk[c] = 1; xe[c] = le[c]; pd[c] = SETM(le[c]); ay[c] = 0; ym[c] = 0; \
		printf("EV extend c=%d e=%d\n", c, le[c]) } \
	:: d_step { !op[c] && g[c] && nx[c] < EXTENDS && ce[c] != le[c] -> \
		nx[c]++; op[c] = 1; xk[c] = 1; xe[c] = ce[c]; pd[c] = SETM(ce[c]); ay[c] = 0; ym[c] = 0; \
		printf("EV extend c=%d e=%d\n", c, ce[c]) }

/* acquire.lua on m, with the record check first. A round's calls are
 * applied in the order of the masters' ids: what a call meets depends only
 * on the steps on its own master before it (the other client's call, the
 * operator's install), and every order of those steps on each master is
 * still reachable, so the other orders of one round's calls add states and
 * no outcome. */
#define APPLY(c,m) \
	:: d_step { op[c] && (pd[c] & ((2 << m) - 1)) == (1 << m) -> \
		pd[c] = pd[c] & ~(1 << m); \
		if :: CHECKS && REC(m) != xe[c] -> \
			if :: REC(m) > xe[c] -> printf("EV vote c=%d m=%d stale rec=%d\n", c, m, REC(m)) \
			   :: else -> printf("EV vote c=%d m=%d behind rec=%d\n", c, m, REC(m)) fi \
		   :: xk[c] -> \
			if :: kv[m] == c + 1 -> kl[m] = K; ay[c]++; XYES(c,m) printf("EV vote c=%d m=%d yes\n", c, m) \
			   :: else -> printf("EV vote c=%d m=%d no\n", c, m) fi \
		   :: else -> \
			FREAD(c,m) \
			if :: kv[m] == 0 -> kv[m] = c + 1; kl[m] = K; ay[c]++; ym[c] = ym[c] | (1 << m); \
				printf("EV vote c=%d m=%d yes\n", c, m) \
			   :: else -> printf("EV vote c=%d m=%d no\n", c, m) fi fi }

#define RB(c,m) if :: ((ym[c] >> m) & 1) && kv[m] == c + 1 -> kv[m] = 0; kl[m] = 0 :: else -> skip fi;
#define DECIDE(c) \
	:: d_step { op[c] && pd[c] == 0 -> \
		op[c] = 0; \
		if :: xk[c] && QOK(c) -> \
			vl[c] = V; le[c] = xe[c]; \
			printf("EV extended c=%d e=%d valid=%d\n", c, xe[c], V) \
		   :: xk[c] && !QOK(c) -> \
			printf("EV notextended c=%d e=%d yes=%d\n", c, xe[c], ay[c]) \
		   :: !xk[c] && QOK(c) -> \
			FTOKEN(c) \
			if :: RAISED(c) -> \
				PROP("EV violate mutual-exclusion\n", !OTHER_VALID(c)); \
				TOKENS \
				g[c] = 1; vl[c] = V; le[c] = xe[c]; nx[c] = 0; \
				printf("EV grant c=%d e=%d valid=%d\n", c, xe[c], V) \
			   :: else -> RB(c,0) RB(c,1) RB(c,2) RB(c,3) \
				printf("EV fail c=%d e=%d raised=%d\n", c, xe[c], RZ(c)) fi \
		   :: else -> RB(c,0) RB(c,1) RB(c,2) RB(c,3) \
			printf("EV fail c=%d e=%d yes=%d\n", c, xe[c], ay[c]) fi; \
		xk[c] = 0; xe[c] = 0; ay[c] = 0; ym[c] = 0; FRESET(c) FORGET(c) }

/* a client with no attempt left and no lease: its epoch no longer
 * matters (0), so that dead state does not multiply states */
#define FORGET(c) \
	if :: !g[c] -> le[c] = 0; nx[c] = 0 :: else -> skip fi; \
	if :: na[c] == A && !g[c] && !op[c] -> ce[c] = 0 :: else -> skip fi;

/* a reload: the source, a stale reply, or a read of the masters */
#define RELOAD(c) \
	:: d_step { !op[c] && ce[c] > 0 && ce[c] < hi -> ce[c]++; printf("EV reload c=%d e=%d\n", c, ce[c]) }

/* ---- the operator ---- */

#if RECORDS
/* install f on m: m holds e = f - 1, sealed W ago; or has no record and f
 * adds it */
#ifdef ROLLBACKS
#define KEEP(m) pr[m] = re[m]; lo[m] = 0;
#else
#define KEEP(m)
#endif
#define INSTALL(m) \
	:: d_step { REC(m) != os && (IN(os - 1, m) || IN(os, m)) && \
		((REC(m) == os - 1 && WAITED(m)) || (REC(m) == 0 && re[m] < os && !IN(os - 1, m))) -> \
		KEEP(m) re[m] = os; sd[m] = 0; ws[m] = 0; \
		if :: hi < os -> hi = os :: else -> skip fi; \
		printf("EV install m=%d e=%d\n", m, os) }
/* (no seal in the last step: it would hold nothing back) */
#define SEAL(m) \
	:: d_step { com && os < NE && REC(m) == os && IN(os, m) && !sd[m] -> \
		sd[m] = 1; ws[m] = 0; printf("EV seal m=%d e=%d\n", m, os) }
#define COMMIT \
	:: d_step { !com && \
		NBITS(HOLDERS(os) & SETA(os - 1)) >= QA(os - 1) && QUORUM(HOLDERS(os), os) -> \
		com = 1; printf("EV commit e=%d\n", os) }
#define NEXT \
	:: d_step { com && os < NE -> os++; com = 0; printf("EV step e=%d\n", os) }
#else
/* SWAP: the new list is published; the clients take it when they do */
#define COMMIT \
	:: d_step { !com -> com = 1; hi = os; printf("EV publish e=%d\n", os) }
#endif

#ifdef ROLLBACKS
/* a restart that brings an older record back (sealed long ago) */
#define ROLLBACK(m) \
	:: d_step { nrb < ROLLBACKS && re[m] != pr[m] -> \
		nrb++; re[m] = pr[m]; lo[m] = 1; sd[m] = 1; ws[m] = W; \
		printf("EV rollback m=%d e=%d\n", m, re[m]) }
#endif

/* ---- time ---- */

#define TK(m) \
	if :: kl[m] > 0 -> kl[m]--; if :: kl[m] == 0 -> kv[m] = 0 :: else -> skip fi :: else -> skip fi; \
	if :: sd[m] && ws[m] < W -> ws[m]++ :: else -> skip fi;
#define TC(c) \
	if :: g[c] -> vl[c]--; if :: vl[c] == 0 -> g[c] = 0; FORGET(c) :: else -> skip fi :: else -> skip fi;

init {
	d_step {
		printf("EV start N=%d C=%d A=%d TTL=%d DRIFT=1 W=%d\n", N, C, A, TTL, W);
		os = 2; hi = 1; ce[0] = 1; ce[1] = 1;
#if RECORDS
		/* epoch 1 on {0,1,2}, sealed long ago */
		re[0] = 1; re[1] = 1; re[2] = 1;
		sd[0] = 1; sd[1] = 1; sd[2] = 1;
		ws[0] = W; ws[1] = W; ws[2] = W;
#endif
#ifdef PRIOR_FENCE
		/* before the records the lock was used while master 3 was a
		 * master (removed then, the old way; the plan adds it back):
		 * that lease's token 1 is on masters 0 and 3, with no epoch */
		fv[0] = 1; fv[3] = 1; maxc = 1; lasttok = 1;
#endif
	}
	do
	:: d_step { !op[0] && !op[1] -> TK(0) TK(1) TK(2) TK(3) TC(0) TC(1) printf("EV tick\n") }
	LOCK(0) LOCK(1)
	APPLY(0,0) APPLY(0,1) APPLY(0,2) APPLY(0,3)
	APPLY(1,0) APPLY(1,1) APPLY(1,2) APPLY(1,3)
	DECIDE(0) DECIDE(1)
#if EXTENDS > 0
	EXTEND(0)	/* one client extends: both add states, no other hazard */
#endif
	RELOAD(0) RELOAD(1)
	COMMIT
#if RECORDS
	INSTALL(0) INSTALL(1) INSTALL(2) INSTALL(3)
#ifdef ROLLBACKS
	ROLLBACK(0) ROLLBACK(1) ROLLBACK(2) ROLLBACK(3)
#endif
	SEAL(0) SEAL(1) SEAL(2) SEAL(3)
	NEXT
#endif
	od
}
