/*
 * quorumlock's waiting line and release wake-ups (docs/algorithm.md,
 * "Waiting" and "Fair queue") for SPIN: three masters, quorum two, two or
 * three clients, one Lock call each, retried until it is granted or gives
 * up; time in ticks. docs/verification.md, "The waiting line", says what
 * is modelled and what is not.
 *
 * As in redlock.pml one process runs the world: every step is a guarded
 * d_step chosen nondeterministically and prints one "EV" line.
 *
 * Per master m: the lock key kv[m] (0 free, else client+1), and the line:
 * for each waiter ID (client c, generation g: a requeue gives the call a
 * new ID, generations alternate) a live entry en (ticks left, 0 none) or a
 * tombstone tb (ticks left, 0 none); the entry's arrival is its call's
 * (ar[c], the order in which the Lock calls began). The acquire
 * (acquire_queued.lua), the release (release.lua) and LeaveQueue
 * (leave_queue.lua) are one atomic step each, as the scripts are.
 *
 * Clients (redlock/mutex.go retry, redlock/wait.go): an attempt sends an
 * acquire to every master; the round is decided when every call answered
 * or at its deadline (a quorum of yes: granted; else rolled back: a
 * release where the call said yes or did not answer). After the first
 * failed attempt the client starts its watch (a step of its own: releases
 * before it go unheard) and, with the fresh look, attempts once more at
 * once. A waiting call wakes when the masters that refused its last
 * attempt (or did not answer) and have named it since, with those that
 * said yes, make a quorum; else by its backoff (BACKOFF ticks; NO_BACKOFF:
 * never, so that liveness rests on the wake-ups alone). A fair call whose
 * attempt a master may have granted goes on under a new ID (requeue),
 * after its old ID left every line.
 *
 * Options (-D): C=n clients (2 or 3), PLAIN (non-binding acquires: the
 * polite newcomer; default binding, WithFairQueue), SPLIT (an acquire's
 * reply may come later than its effect, or not before the deadline),
 * DELAY (a call the deadline left unanswered may apply later, a late copy,
 * within STRAG ticks of the deadline, or never), LOSSN (notifications may
 * be lost), GIVEUPS=n (waiting calls that give up: LeaveQueue on every
 * master), DIES=n (waiting calls whose process dies: nothing more is
 * sent), LATES=n (deadlines that leave calls unanswered, in all: SPLIT
 * and DELAY act at most n times), NO_BACKOFF, ETTL=n (entry TTL in
 * ticks), STRAG=n, BACKOFF=n,
 * LIVE (the LTL property `granted`, for the liveness search).
 * Properties (assertions, "EV violate NAME"): mutual-exclusion (at a
 * grant, nobody else holds the lock), kept-out (at an acquire); with
 * GRANT also holds (at a grant, the call's current value is on a quorum
 * of masters; NO_HOLDS: not checked; without hold on grants it is the
 * round's yes) and grant-released (at every tick,
 * no key holds a value of a call that gave up or unlocked).
 * Rules switched off: NO_TOMBSTONE (LeaveQueue leaves no tombstone),
 * NO_REQUEUE (knob NoFairRequeue), NO_FRESH (no fresh look after the
 * watch starts), NO_POLITE (plain acquires barge in: a newcomer takes a
 * free key whoever waits).
 *
 * GRANT: the one-round-trip handoff, in the form the code builds
 * (docs/handoff.md). Each entry records the value of its waiter's latest
 * acquire there that left or kept it in the line (ev, and rc: the record
 * is there). A release (or a LeaveQueue that released a handed key, or of
 * the line's first waiter leaving a free key) names the line's first live
 * waiter to its client (its group's channel: only that client hears it;
 * NOTE_ALL: to every client, as publish does without GRANT); when that
 * waiter's entry has a record, the key is set to the recorded value, the
 * master records that it handed that ID the key (mg), and the record is
 * cleared (KEEP_RECORD: kept), the waiter keeping its place in the line;
 * a waiter without a record is handed nothing. A notification is news for
 * the wake-up rule only: a call holds the lock by its round's yes alone.
 * A call's acquire on a master whose key still holds what that master
 * handed its ID takes the key over (sets it to the attempt's value: a yes,
 * rolled back as any yes; the waiter leaves the line); LeaveQueue of an ID
 * clears its record and releases a key the master handed that ID (and
 * that release hands the key on). Unlock releases where the round said
 * yes or did not answer (UNLOCK_ALL: on every master). A dead waiter's
 * keys expire (EXPIRE: before the next tick). Values are a client and a
 * parity that flips at each attempt (at an attempt's start, whatever holds
 * the new parity's earlier use is relabelled: every older value is one).
 * Plain calls too requeue after an unanswered call. Every notification is
 * a step of its own. Sub-rules switched off: NO_TAKEOVER,
 * NO_LEAVE_RELEASE, NO_PLAIN_REQUEUE (plain calls keep their ID, as
 * without GRANT). SPLITNO (with SPLIT): a refusal's reply, too, may come
 * later than its effect, or not before the deadline.
 *
 * GRANT_HOLD: the code's form (GRANT, the waiter keeping its place) with
 * the hold on grants (implies GRANT). H1: a hand-over (by a release, or
 * by a LeaveQueue that released a handed key) notifies the waiter with
 * its ID and the handed value (v = 4 + ID*2 + value). H2: a call counts
 * master m's grant (its ID, value v) only when v is its current value
 * and m refused the current attempt with the key held, its refusal's
 * reply arrived (ao O_NO; a refusal by the line with the key free is
 * O_NOL; a yes, rolled back, and an unanswered call do not count);
 * counting starts once the attempt has failed and been rolled back
 * (grants heard before, for the same value, are remembered: gn); when
 * the counted grants make a quorum (VALID=n: the attempt began less than
 * n ticks before) the call holds the lock on them (gc: counted), no new
 * round. H3: the hold's LeaveQueue goes to every master but the counted
 * ones. H4: a release of value v that deletes the key, on a master whose
 * grant record names (X, v), takes X out of the line (its record too;
 * no tombstone) before handing the key on. H5: Unlock releases where the
 * round said yes or did not answer, and on the counted masters. Rules
 * switched off: NO_CURVAL (a grant heard for any value of the call's ID
 * counts, until the call ends), HOLD_UNANSWERED (an unanswered master
 * counts too), HOLD_LEAVE_ALL (the hold's LeaveQueue goes to every
 * master), NO_HOLD_RELEASE (no H4). HOLD_LINE_NO: a refusal by the line
 * (key free) counts too. RDELAY: a rollback's release to a master that
 * did not answer may apply later (a step of its own, before the next
 * tick), not at once. Properties judged more closely: holds also at
 * every tick while held, kept-out also when the line's first is the
 * current ID of a call that holds or held the lock; REACH: the assertion
 * hold-by-grants fails at any hold on grants (that one is reachable).
 *
 * GRANT_OLD: the handoff as first modelled, before it was built (implies
 * GRANT). A hand-over takes the waiter out of the line (no tombstone) and
 * notifies it with a grant; a call holds the lock when grants heard for
 * its current value and its current round's yes make a quorum (at the
 * round's end, or on hearing a grant while it waits: no new round);
 * Unlock releases on every master. NO_CURVAL as above.
 */

/* GRANT_OLD: the handoff as first modelled (a hand-over takes the waiter
 * out of the line; a call holds with grants); GRANT alone: the code's form
 * (GKEEP: the waiter keeps its place; no hold on grants); GRANT_HOLD: the
 * code's form with the hold on grants */
#if defined(GRANT_OLD) || defined(GRANT_HOLD)
#ifndef GRANT
#define GRANT
#endif
#endif
#if defined(GRANT) && !defined(GRANT_OLD)
#define GKEEP
#endif
#if defined(GRANT_OLD) && defined(GRANT_HOLD)
#error GRANT_OLD and GRANT_HOLD are two forms of the hold on grants
#endif

#ifndef C
#define C 3		/* clients, one Lock call each */
#endif
#define N 3		/* masters */
#define Q 2		/* quorum */
#ifndef ETTL
#define ETTL 2		/* entry TTL (and a tombstone's), ticks */
#endif
#ifndef STRAG
#define STRAG 1		/* a late copy applies within STRAG ticks of its round's deadline, or never */
#endif
#ifndef BACKOFF
#define BACKOFF 1	/* a waiting call retries within BACKOFF ticks */
#endif
#ifndef HT
#define HT 1		/* a holder unlocks within HT ticks (before its key's TTL) */
#endif
#ifndef LATES
#define LATES 255	/* deadlines with calls unanswered, in all */
#endif
#ifndef GIVEUPS
#define GIVEUPS 0
#endif
#ifndef DIES
#define DIES 0
#endif

#define IE(m,c,g) (((m)*C + (c))*2 + (g))
#define CM(c,m) ((c)*N + (m))
#define MC(m,c) ((m)*C + (c))

/* client states */
#define IDLE 0		/* no Lock call yet */
#define ATT 1		/* an attempt's round is open */
#define WSTART 2	/* first attempt failed: the watch is starting */
#define WAIT 3		/* waiting (settled) for a wake-up or the backoff */
#define HOLD 4
#define DONE 5		/* unlocked */
#define GONE 6		/* gave up */
#define DEAD 7		/* died */
#define CALLING(c) (st[c] == ATT || st[c] == WSTART || st[c] == WAIT)

/* a call (aq) */
#define FLY 1		/* sent, not applied */
#define PENDY 2		/* applied, said yes (the key is ours), reply not back */
#define PENDN 3		/* SPLITNO: applied, said no, reply not back */
#define PENDNL 4	/* GRANT_HOLD, SPLITNO: the same, the key free (refused by the line) */
/* its outcome (ao) */
#define O_YES 1
#define O_NO 2		/* refused (GRANT_HOLD: with the key held) */
#define O_UNK 3		/* no reply by the deadline */
#define O_NOL 4		/* GRANT_HOLD: refused by the line, the key free */
/* a refusal's outcome on m (after the acquire: it changed no key) */
#ifdef GRANT_HOLD
#define REFUSED(m) (kv[m] != 0 -> O_NO : O_NOL)
#define PREFUSED(m) (kv[m] != 0 -> PENDN : PENDNL)
#else
#define REFUSED(m) O_NO
#define PREFUSED(m) PENDN
#endif

/* a notification (nt): names (c, g) as g+1, or "" */
#define N_ANY 3

#ifdef PLAIN
#define FAIR 0
#else
#define FAIR 1
#endif

#define PROP(msg, cond) \
	if :: !(cond) -> printf(msg); assert(cond) \
	   :: else -> skip fi

/* a client's key value: its current one (GRANT: client and value parity) */
#ifdef GRANT
#define KV(c) (1 + (c)*2 + cv[c])
#define OWNER(v) (((v)-1)/2)
#else
#define KV(c) ((c)+1)
#endif

/* masters */
byte kv[N];		/* 0 free, else KV of its holder */
byte en[N*C*2];		/* live entry: ticks left, 0 not in the line */
byte tb[N*C*2];		/* tombstone: ticks left */
/* A grant leaves no tombstone, and a call requeues (goes on under a new
 * ID) only when a call of its last attempt went unanswered: the requeue
 * retires every ID that may still have a copy on the way, so no later
 * acquire of a granted ID can come. GRANT_TOMB: as before, a grant leaves
 * a tombstone and a yes requeues too (a granted waiter is kept out of the
 * master's line until the tombstone expires). */
#ifdef GRANT_TOMB
#define GRANTTOMB(x) tb[x] = ETTL;
#define RQYES(c) rq[c] = 1;
#else
#define GRANTTOMB(x) skip;
#define RQYES(c)
#endif
#ifdef DELAY
bit lf[N*C*2];		/* the ID left this master's line (property kept-out:
			 * only a late copy can bring it back) */
#define LEFT(x) lf[x] = 1;
#define LF0(x) lf[x] = 0;
#define LFX(x) lf[x]
#else
#define LEFT(x)
#define LF0(x)
#define LFX(x) 0
#endif
#ifdef GRANT
bit ev[N*C*2];		/* the value (parity) of the entry's latest acquire */
byte mg[N];		/* the key holds what m granted waiter (c,g): c*2+g+1 */
bit cv[C];		/* the call's current value (parity): flips at each attempt */
bit lv[C*N];		/* the value of a late copy */
#define AVAL(c,m,late) (late -> lv[CM(c,m)] : cv[c])
#ifdef GKEEP
bit rc[N*C*2];		/* the entry has a value record (ev): a hand-over clears it */
#define SETEV(x, v) ev[x] = v; rc[x] = 1;
#define CLREV(x) ev[x] = 0; rc[x] = 0;
#define GN(c,m) 0
#ifdef GRANT_HOLD
bit gn[C*N];		/* a grant from m heard for the current value (NO_CURVAL: any) */
bit gc[C*N];		/* the call holds by grants: m counted */
/* H2: m's grant counts (the refusal's reply arrived, the key held) */
#if defined(HOLD_UNANSWERED) && defined(HOLD_LINE_NO)
#define CNT(c,m) (gn[CM(c,m)] && (ao[CM(c,m)] == O_NO || ao[CM(c,m)] == O_NOL || ao[CM(c,m)] == O_UNK))
#elif defined(HOLD_UNANSWERED)
#define CNT(c,m) (gn[CM(c,m)] && (ao[CM(c,m)] == O_NO || ao[CM(c,m)] == O_UNK))
#elif defined(HOLD_LINE_NO)
#define CNT(c,m) (gn[CM(c,m)] && (ao[CM(c,m)] == O_NO || ao[CM(c,m)] == O_NOL))
#else
#define CNT(c,m) (gn[CM(c,m)] && ao[CM(c,m)] == O_NO)
#endif
#define BYGRANTS(c) (gc[CM(c,0)] || gc[CM(c,1)] || gc[CM(c,2)])
#ifdef HOLD_LEAVE_ALL
#define GLEAVE(c,m) 1
#else
#define GLEAVE(c,m) !gc[CM(c,m)]
#endif
#ifdef VALID
byte ag[C];		/* ticks since the attempt began (to VALID) */
#endif
#ifdef RDELAY
byte pr[C*N];		/* a rollback's release on its way: its value (parity) + 1 */
#endif
#endif
#else
bit gn[C*N];		/* a grant from m heard for the current value (NO_CURVAL: any) */
#define SETEV(x, v) ev[x] = v;
#define CLREV(x) ev[x] = 0;
#define GN(c,m) gn[CM(c,m)]
#endif
#else
#define SETEV(x, v)
#define CLREV(x)
#define GN(c,m) 0
#endif
#ifdef GRANT_HOLD
#define HELDBY(c,g) ((g) == gen[c] && (st[c] == HOLD || st[c] == DONE))
#else
#define HELDBY(c,g) 0
#endif
#ifndef BYGRANTS
#define BYGRANTS(c) 0
#define GLEAVE(c,m) 0
#endif
/* clients */
byte st[C];
bit gen[C];		/* the call's current ID */
bit rq[C];		/* its last attempt may have been granted somewhere */
byte aq[C*N];
byte ao[C*N];
byte lq[C*N];		/* a late copy of the acquire of ID g: g+1 */
byte lt[C*N];		/* ticks it may still apply in */
bit wst[C];		/* watching */
bit tk[C*N];		/* settled: refused or unanswered */
byte fr[C];		/* settled: said yes */
bit sn[C*N];		/* named by m since the attempt began */
bit wk[C];		/* woken: its next attempt is due */
#if defined(LOSSN) || defined(GRANT)
#define ASYNCN
byte nt[N*C];		/* notification on its way from m to c (GRANT: every
			 * notification is a step of its own) */
#endif
byte bt[C];		/* backoff ticks left */
byte hl[C];		/* hold ticks left */
byte ngu, ndie, nlate;
#ifdef LIVE
bit tka;		/* flips at every tick (the liveness property's fairness) */
#define TKA tka = 1 - tka
#else
#define TKA skip
#endif

/* the scratch variables xi, xj, xk, xt, hc, hg, yes, news are world's:
 * always 0 between steps */

/* The first live entry of m's line: hc = client+1 (0 none), hg its ID.
 * Ties (two IDs of one call, its old and its new, the same arrival) go to
 * the old ID. */
inline head(m) {
	hc = 0; hg = 0;
	for (xi : 0 .. C-1) {
		for (xj : 0 .. 1) {
			if
			:: en[IE(m,xi,xj)] > 0 && (hc == 0 || xi < hc-1 ||
				(xi == hc-1 && xj != gen[xi])) -> hc = xi+1; hg = xj
			:: else -> skip
			fi
		}
	}
	xi = 0; xj = 0
}

/* someone other than (c,g) in m's line */
inline others(m, c, g) {
	xt = 0;
	for (xi : 0 .. C*2 - 1) {
		if :: en[(m)*C*2 + xi] > 0 && xi != (c)*2 + (g) -> xt = 1 :: else -> skip fi
	}
	xi = 0
}

/* the line or a tombstone exists on m (the fast path is taken without) */
inline lineexists(m) {
	xt = 0;
	for (xi : 0 .. C*2 - 1) {
		if :: en[(m)*C*2 + xi] > 0 || tb[(m)*C*2 + xi] > 0 -> xt = 1 :: else -> skip fi
	}
	xi = 0
}

/* the wake-up rule (watch.check): its next attempt is due */
inline check(c) {
	news = 0;
	for (xj : 0 .. N-1) {
		if :: sn[CM(c,xj)] && tk[CM(c,xj)] -> news++ :: else -> skip fi
	}
	xj = 0;
	if
	:: news > 0 && news + fr[c] >= Q && !wk[c] -> printf("EV wake c=%d\n", c); wk[c] = 1
	:: else -> skip
	fi;
	news = 0
}

/* a notification from m naming v reaches c's watch: it names c's current
 * ID, or "" (the client's oldest waiter: its only one) */
inline hear(m, c, v) {
	if
	:: wst[c] && (st[c] == ATT || st[c] == WAIT) && (v == N_ANY || v == gen[c]+1) ->
		sn[CM(c,m)] = 1; printf("EV note m=%d c=%d\n", m, c);
		if :: st[c] == WAIT -> check(c) :: else -> skip fi
	:: else -> skip
	fi
}

/* PUBLISH on m's channel: to every client's watch */
inline publish(m, v) {
	for (xk : 0 .. C-1) {
#ifdef ASYNCN
		nt[MC(m,xk)] = v
#else
		hear(m, xk, v)
#endif
	}
	xk = 0
}

#ifdef GRANT
/* GRANT: m's key was just deleted (a release, a LeaveQueue that released
 * a grant; any: a LeaveQueue of the line's first waiter leaving a free
 * key): the line's first live waiter gets the key, set to its recorded
 * value; it leaves the line (no tombstone), m records the grant, and the
 * waiter is notified; nobody in line: any names "" */
#ifdef NOTE_ALL
#define NAMEIT(m, c, g) publish(m, g+1);
#else
#define NAMEIT(m, c, g) nt[MC(m,c)] = g+1;
#endif
#ifdef GKEEP
/* GRANT (the code's form): m's key was just deleted (a release, a
 * LeaveQueue that released a grant; any: a LeaveQueue of the line's first
 * waiter leaving a free key). The line's first live waiter is named
 * (publish, as without GRANT); when its entry has a value record the key
 * is set to that value and m records the grant, the waiter keeping its
 * place in the line and its record cleared (KEEP_RECORD: kept); a waiter
 * without a record (handed the key before) is handed nothing. Nobody in
 * line: any names "" */
inline handoff(m, any) {
	mg[m] = 0;
	head(m);
	if
	:: hc > 0 && rc[IE(m,hc-1,hg)] ->
		kv[m] = 1 + (hc-1)*2 + ev[IE(m,hc-1,hg)];
		mg[m] = (hc-1)*2 + hg + 1;
#ifndef KEEP_RECORD
		rc[IE(m,hc-1,hg)] = 0; ev[IE(m,hc-1,hg)] = 0;
#endif
		printf("EV handoff m=%d c=%d g=%d val=%d\n", m, hc-1, hg, (kv[m]-1)%2);
#ifdef GRANT_HOLD
		/* H1: the waiter is told its ID and the handed value */
		nt[MC(m,hc-1)] = 4 + hg*2 + (kv[m]-1)%2
#else
		NAMEIT(m, hc-1, hg)
#endif
	:: hc > 0 ->
		printf("EV handoff m=%d c=%d g=%d norecord\n", m, hc-1, hg);
		NAMEIT(m, hc-1, hg)
	:: else -> printf("EV handoff m=%d none\n", m);
		if :: any -> publish(m, N_ANY) :: else -> skip fi
	fi;
	hc = 0; hg = 0
}
#else
inline handoff(m, any) {
	mg[m] = 0;
	head(m);
	if
	:: hc > 0 ->
		kv[m] = 1 + (hc-1)*2 + ev[IE(m,hc-1,hg)];
		mg[m] = (hc-1)*2 + hg + 1;
		en[IE(m,hc-1,hg)] = 0; ev[IE(m,hc-1,hg)] = 0;
		if :: FAIR -> LEFT(IE(m,hc-1,hg)) :: else -> skip fi
		printf("EV handoff m=%d c=%d g=%d val=%d\n", m, hc-1, hg, (kv[m]-1)%2);
		nt[MC(m,hc-1)] = 4 + hg*2 + (kv[m]-1)%2
	:: else -> printf("EV handoff m=%d none\n", m);
		if :: any -> publish(m, N_ANY) :: else -> skip fi
	fi;
	hc = 0; hg = 0
}
#endif
#endif

/* release.lua, the key being c's: delete; if someone is in line, name its
 * first waiter */
#ifdef GRANT
#define release(c, m) releasev(c, m, cv[c])
/* the key holds c's value of parity par */
inline releasev(c, m, par) {
	if
	:: kv[m] == 1 + (c)*2 + (par) ->
		kv[m] = 0;
		printf("EV release c=%d m=%d\n", c, m);
#if defined(GRANT_HOLD) && !defined(NO_HOLD_RELEASE)
		/* H4: the key was handed to X (a holder by grants): X leaves
		 * the line (no tombstone) before the key is handed on */
		if
		:: mg[m] != 0 -> hc = mg[m] - 1;
			en[IE(m,hc/2,hc%2)] = 0; CLREV(IE(m,hc/2,hc%2))
			if :: FAIR -> LEFT(IE(m,hc/2,hc%2)) :: else -> skip fi;
			printf("EV release-leave m=%d c=%d g=%d\n", m, hc/2, hc%2);
			hc = 0
		:: else -> skip
		fi;
#endif
		handoff(m, 0)
	:: else -> skip	/* not ours: a guard (late copies never take the key) */
	fi
}
#else
inline release(c, m) {
	if
	:: kv[m] == KV(c) ->
		kv[m] = 0;
		head(m);
		if
		:: hc > 0 -> printf("EV release c=%d m=%d next=%d g=%d\n", c, m, hc-1, hg);
			publish(m, hg+1)
			/* a notification names hc-1's ID: only that client's watch uses it */
		:: else -> printf("EV release c=%d m=%d next=none\n", c, m)
		fi;
		hc = 0; hg = 0
	:: else -> skip	/* not ours: a guard (late copies never take the key) */
	fi
}
#endif

/* a rollback's release to a master that did not answer (RDELAY: on its
 * way, applied before the next tick; one already on its way applies
 * first) */
#ifdef RDELAY
#define RBACK(c, m) \
	if :: pr[CM(c,m)] != 0 -> xp = pr[CM(c,m)] - 1; pr[CM(c,m)] = 0; releasev(c, m, xp); xp = 0 :: else -> skip fi; \
	pr[CM(c,m)] = cv[c] + 1
#define RAPPLY(c,m) \
	:: d_step { pr[CM(c,m)] != 0 -> xp = pr[CM(c,m)] - 1; pr[CM(c,m)] = 0; \
		printf("EV rapply c=%d m=%d\n", c, m); releasev(c, m, xp); xp = 0; norm() }
#define RAPPLY_MC(m,c) RAPPLY(c,m)
#define PR_PENDING(m,c) || pr[CM(c,m)] != 0
#else
#define RBACK(c, m) release(c, m)
#define PR_PENDING(m,c)
#endif

/* leave_queue.lua of (c,g) on m: out of the line, a tombstone; the line's
 * first waiter leaving a free key names the next one ("" when none) */
inline leaveq(c, g, m) {
	head(m);
	xt = (hc == c+1 && hg == g && kv[m] == 0);
	hc = 0; hg = 0;
	if :: en[IE(m,c,g)] == 0 -> xt = 0 :: else -> skip fi;
	en[IE(m,c,g)] = 0;
#ifndef NO_TOMBSTONE
	tb[IE(m,c,g)] = ETTL;
#endif
	LEFT(IE(m,c,g))
	printf("EV leave c=%d m=%d g=%d\n", c, m, g);
#ifdef GRANT
	CLREV(IE(m,c,g))
#ifndef NO_LEAVE_RELEASE
	/* the key holds what m granted this ID: released */
	if :: mg[m] == c*2 + g + 1 -> kv[m] = 0; xt = 2; printf("EV leave-release c=%d m=%d g=%d\n", c, m, g) :: else -> skip fi;
#endif
	if :: xt -> handoff(m, xt == 1) :: else -> skip fi;
#else
	if
	:: xt -> head(m);
		if
		:: hc > 0 -> printf("EV publish m=%d next=%d g=%d\n", m, hc-1, hg); publish(m, hg+1)
		:: else -> printf("EV publish m=%d next=none\n", m); publish(m, N_ANY)
		fi;
		hc = 0; hg = 0
	:: else -> skip
	fi;
#endif
	xt = 0
}
/* the lock is c's: by its round's yes, or (GRANT_OLD, GRANT_HOLD) with
 * grants */
inline hold(c) {
	PROP("EV violate mutual-exclusion\n", !(0
		|| (c != 0 && st[0] == HOLD) || (c != 1 && st[1] == HOLD)
#if C > 2
		|| (c != 2 && st[2] == HOLD)
#endif
	));
#ifdef GRANT
	/* its value is on a quorum of masters */
	yes = (kv[0] == KV(c)) + (kv[1] == KV(c)) + (kv[2] == KV(c));
#ifndef NO_HOLDS
	PROP("EV violate holds\n", yes >= Q);
#endif
	yes = 0;
#endif
	printf("EV grant c=%d g=%d\n", c, gen[c]);
	st[c] = HOLD; hl[c] = HT; wst[c] = 0;
	/* out of the line where it did not acquire (GRANT_HOLD, by grants:
	 * H3, every master but the counted ones) */
	if :: (BYGRANTS(c) -> GLEAVE(c,0) : ao[CM(c,0)] != O_YES && !GN(c,0)) -> leaveq(c, gen[c], 0) :: else -> skip fi;
	if :: (BYGRANTS(c) -> GLEAVE(c,1) : ao[CM(c,1)] != O_YES && !GN(c,1)) -> leaveq(c, gen[c], 1) :: else -> skip fi;
	if :: (BYGRANTS(c) -> GLEAVE(c,2) : ao[CM(c,2)] != O_YES && !GN(c,2)) -> leaveq(c, gen[c], 2) :: else -> skip fi
}

#ifdef GRANT_HOLD
#ifdef VALID
#define INVALID(c) (ag[c] >= VALID)
#else
#define INVALID(c) 0
#endif
/* H2: the grants c counts (yes); a quorum: the call holds with them */
inline ghold(c) {
	yes = CNT(c,0) + CNT(c,1) + CNT(c,2);
	if
	:: yes >= Q && !INVALID(c) ->
		gc[CM(c,0)] = CNT(c,0); gc[CM(c,1)] = CNT(c,1); gc[CM(c,2)] = CNT(c,2);
		yes = 0;
		printf("EV hold-grants c=%d g=%d m0=%d m1=%d m2=%d\n", c, gen[c], gc[CM(c,0)], gc[CM(c,1)], gc[CM(c,2)]);
#ifdef REACH
		/* a check of the check: a hold on grants is reachable */
		PROP("EV violate hold-by-grants\n", 0);
#endif
		hold(c)
	:: else -> yes = 0
	fi
}

/* H1/H2: a grant's notification (v = 4 + g*2 + value) from m reaches c's
 * watch: news for the wake-up rule, as any notification naming the ID; it
 * is remembered when it names the call's current ID and value
 * (NO_CURVAL: any value of the ID); a waiting call (its attempt failed
 * and rolled back) whose counted grants make a quorum holds the lock,
 * else the wake-up rule decides */
inline hgrant(m, c, v) {
	if
	:: wst[c] && (st[c] == ATT || st[c] == WAIT) && (v-4)/2 == gen[c] ->
		printf("EV gnote m=%d c=%d val=%d\n", m, c, (v-4)%2);
#ifndef NO_CURVAL
		if :: (v-4)%2 == cv[c] -> gn[CM(c,m)] = 1 :: else -> skip fi;
#else
		gn[CM(c,m)] = 1;
#endif
		sn[CM(c,m)] = 1;
		if
		:: st[c] == WAIT -> ghold(c);
			if :: st[c] == WAIT -> check(c) :: else -> skip fi
		:: else -> skip
		fi
	:: else -> skip
	fi
}
#endif

#ifdef GRANT_OLD
/* a grant's notification (v = 4 + g*2 + value) from m reaches c's watch:
 * it counts when it names the call's current ID and value (NO_CURVAL:
 * any value of the ID); a waiting call whose grants make a quorum holds
 * the lock, else the wake-up rule decides (the grant names it) */
inline hgrant(m, c, v) {
	if
	:: wst[c] && (st[c] == ATT || st[c] == WAIT) && (v-4)/2 == gen[c] ->
		printf("EV gnote m=%d c=%d val=%d\n", m, c, (v-4)%2);
#ifndef NO_CURVAL
		if :: (v-4)%2 == cv[c] -> gn[CM(c,m)] = 1 :: else -> skip fi;
#else
		gn[CM(c,m)] = 1;
#endif
		sn[CM(c,m)] = 1;
		if
		:: st[c] == WAIT && gn[CM(c,0)] + gn[CM(c,1)] + gn[CM(c,2)] >= Q ->
			/* its failed round's yes were rolled back: the grants are its keys */
			ao[CM(c,0)] = 0; ao[CM(c,1)] = 0; ao[CM(c,2)] = 0;
			hold(c)
		:: st[c] == WAIT -> check(c)
		:: else -> skip
		fi
	:: else -> skip
	fi
}
#endif

#if defined(GRANT_OLD) || defined(GRANT_HOLD)
inline hearg(m, c, v) {
	if
	:: v >= 4 -> hgrant(m, c, v)
	:: else -> hear(m, c, v)
	fi
}
#endif


/* acquire_queued.lua of (c,g) on m; late: a late copy (the release guard
 * its round's rollback left refuses it the key). Sets xt: 1 yes, 0 no. */
inline acquire(c, g, m, late) {
#if defined(GRANT) && !defined(NO_TAKEOVER)
	if
	:: !late && mg[m] == c*2 + g + 1 ->
		/* the key holds what m granted this ID: taken over, a yes */
		printf("EV takeover c=%d m=%d g=%d\n", c, m, g);
		kv[m] = KV(c); mg[m] = 0; xt = 1;
		en[IE(m,c,g)] = 0; CLREV(IE(m,c,g))
#ifdef GKEEP
		/* the waiter kept its place until now: it leaves the line */
		if :: FAIR -> LEFT(IE(m,c,g)) :: else -> skip fi;
#endif
		skip
	:: else ->
#endif
	lineexists(m);
	if
	:: !xt ->	/* the fast path: nobody in line, no tombstone */
		if
		:: kv[m] == 0 && !late -> kv[m] = KV(c); xt = 1;
			if :: FAIR -> GRANTTOMB(IE(m,c,g)) LEFT(IE(m,c,g)) :: else -> skip fi
		:: kv[m] == 0 -> xt = 0
		:: kv[m] == KV(c) -> xt = 1
		:: else -> en[IE(m,c,g)] = ETTL; SETEV(IE(m,c,g), AVAL(c,m,late)) xt = 0;
			if :: !late -> LF0(IE(m,c,g)) :: else -> skip fi
		fi
	:: else ->
		if
		:: tb[IE(m,c,g)] > 0 ->	/* left: enters nothing */
			xt = (kv[m] == KV(c) && !late);
			/* a call of this ID refused a free key by its own tombstone */
			PROP("EV violate kept-out\n", late || kv[m] != 0)
		:: else ->
			hc = (en[IE(m,c,g)] > 0);	/* in line before this call */
			en[IE(m,c,g)] = ETTL; SETEV(IE(m,c,g), AVAL(c,m,late))
			/* the call itself (not a late copy) is a live waiter again */
			if :: !late -> LF0(IE(m,c,g)) :: else -> skip fi;
			if
			:: late -> xt = 0
			:: kv[m] == KV(c) -> xt = 1
			:: kv[m] != 0 -> xt = 0
			:: else ->
#if FAIR
				head(m);
				xt = (hc == c+1 && hg == g);
#elif defined(NO_POLITE)
				xt = 1;
#else
				if :: hc -> xt = 1
				   :: else -> others(m, c, g); xt = !xt fi;
#endif
				if
				:: xt -> kv[m] = KV(c)
				:: else -> /* refused by the line although the key is free:
					    * never for a waiter that left this line
					    * (GRANT_HOLD: nor for a call that holds or
					    * held the lock) */
#if defined(DELAY) || defined(GRANT_HOLD)
					head(m);
					PROP("EV violate kept-out\n", !(hc > 0 && (LFX(IE(m,hc-1,hg)) || HELDBY(hc-1,hg))))
#else
					skip
#endif
				fi
			fi;
			if	/* granted: out of the line (a fair waiter stays out) */
			:: xt -> en[IE(m,c,g)] = 0; CLREV(IE(m,c,g))
				if :: FAIR -> GRANTTOMB(IE(m,c,g)) LEFT(IE(m,c,g)) :: else -> skip fi
			:: else -> skip
			fi;
			hc = 0; hg = 0
		fi
	fi
#if defined(GRANT) && !defined(NO_TAKEOVER)
	fi
#endif
}

/* What can no longer matter is forgotten, so that it does not multiply
 * states: the tombstone (and the left mark) of an ID that will send
 * nothing more (its call ended, or it was requeued away) and has no late
 * copy on the way to that master (a tombstone only ever stops its own ID);
 * the rounds' leftovers of a call that ended. */
inline norm() {
	for (xi : 0 .. N*C*2 - 1) {
		if
		:: (tb[xi] > 0 || LFX(xi)) && en[xi] == 0 &&
		   !(CALLING((xi/2)%C) && (xi%2) == gen[(xi/2)%C]) &&
		   lq[CM((xi/2)%C, xi/(2*C))] != (xi%2)+1 -> tb[xi] = 0; LF0(xi)
		:: else -> skip
		fi
	}
	for (xi : 0 .. C-1) {
		if
		:: !CALLING(xi) && st[xi] != HOLD ->
			for (xj : 0 .. N-1) {
				ao[CM(xi,xj)] = 0; tk[CM(xi,xj)] = 0; sn[CM(xi,xj)] = 0
			}
			fr[xi] = 0; bt[xi] = 0; hl[xi] = 0; rq[xi] = 0; wk[xi] = 0
#ifdef GRANT
			; cv[xi] = 0
#endif
		:: else -> skip
		fi
#if defined(GRANT_OLD) || defined(GRANT_HOLD)
		; if
		:: !CALLING(xi) -> gn[CM(xi,0)] = 0; gn[CM(xi,1)] = 0; gn[CM(xi,2)] = 0
		:: else -> skip
		fi
#endif
#ifdef GRANT_HOLD
		; if
		:: !CALLING(xi) && st[xi] != HOLD -> gc[CM(xi,0)] = 0; gc[CM(xi,1)] = 0; gc[CM(xi,2)] = 0
#ifdef VALID
			; ag[xi] = 0
#endif
		:: else -> skip
		fi
#endif
	}
#ifdef GRANT
	for (xi : 0 .. N*C*2 - 1) {
		if :: en[xi] == 0 -> ev[xi] = 0 :: else -> skip fi
#ifdef GKEEP
		; if :: en[xi] == 0 || rc[xi] == 0 -> ev[xi] = 0; rc[xi] = 0 :: else -> skip fi
#endif
	}
	for (xi : 0 .. C*N - 1) {
		if :: lq[xi] == 0 -> lv[xi] = 0 :: else -> skip fi
	}
#endif
	xi = 0; xj = 0
}

/* a reused generation is a new random ID: what the old one left is not its */
inline wipe(c, g) {
	for (xj : 0 .. N-1) {
		en[IE(xj,c,g)] = 0; tb[IE(xj,c,g)] = 0; LF0(IE(xj,c,g))
		if :: lq[CM(c,xj)] == g+1 -> lq[CM(c,xj)] = 0; lt[CM(c,xj)] = 0 :: else -> skip fi;
#ifdef ASYNCN
		if :: nt[MC(xj,c)] == g+1 -> nt[MC(xj,c)] = 0 :: else -> skip fi;
#endif
#ifdef GRANT
		/* grants to the old use of the ID: the record names another ID */
		if :: nt[MC(xj,c)] >= 4 && (nt[MC(xj,c)]-4)/2 == g -> nt[MC(xj,c)] = 0 :: else -> skip fi;
		if :: mg[xj] == c*2 + g + 1 -> mg[xj] = 0 :: else -> skip fi;
		CLREV(IE(xj,c,g))
#endif
		skip
	}
	xj = 0
}

/* an attempt begins: requeue first (a fair call, or with GRANT any call,
 * whose last attempt a master may have granted: its old ID leaves every
 * line, the call goes on under a new one with the same arrival) */
inline attempt(c) {
#if (FAIR || (defined(GRANT) && !defined(NO_PLAIN_REQUEUE))) && !defined(NO_REQUEUE)
	if
	:: rq[c] ->
		leaveq(c, gen[c], 0); leaveq(c, gen[c], 1); leaveq(c, gen[c], 2);
		gen[c] = 1 - gen[c]; wipe(c, gen[c])
	:: else -> skip
	fi;
#endif
	rq[c] = 0;
#ifdef GRANT
	/* a new value. Every value a call used before is one "older value"
	 * (parity 1 - cv): no release, grant or count tells two older
	 * values apart (a release names the current value; a grant, a take-
	 * over and LeaveQueue go by the ID), so what holds the parity's
	 * earlier use (keys, entries, late copies, notifications) is
	 * relabelled older */
	cv[c] = 1 - cv[c];
	for (xj : 0 .. N-1) {
		if :: kv[xj] == KV(c) -> kv[xj] = 1 + c*2 + 1 - cv[c] :: else -> skip fi;
		ev[IE(xj,c,0)] = 1 - cv[c]; ev[IE(xj,c,1)] = 1 - cv[c];
		lv[CM(c,xj)] = 1 - cv[c];
		if :: nt[MC(xj,c)] >= 4 -> nt[MC(xj,c)] = 4 + ((nt[MC(xj,c)]-4)/2)*2 + 1 - cv[c] :: else -> skip fi
#ifdef RDELAY
		; if :: pr[CM(c,xj)] != 0 -> pr[CM(c,xj)] = 2 - cv[c] :: else -> skip fi
#endif
	}
	xj = 0;
#if (defined(GRANT_OLD) || defined(GRANT_HOLD)) && !defined(NO_CURVAL)
	/* grants heard for an older value no longer count */
	gn[CM(c,0)] = 0; gn[CM(c,1)] = 0; gn[CM(c,2)] = 0;
#endif
#ifdef VALID
	ag[c] = 0;
#endif
#endif
	printf("EV attempt c=%d g=%d\n", c, gen[c]);
	for (xj : 0 .. N-1) {
		sn[CM(c,xj)] = 0; tk[CM(c,xj)] = 0; ao[CM(c,xj)] = 0; aq[CM(c,xj)] = FLY
	}
	xj = 0; fr[c] = 0; bt[c] = 0; wk[c] = 0;
	st[c] = ATT;
	norm()
}

inline settle(c) {
	for (xj : 0 .. N-1) {
		tk[CM(c,xj)] = (ao[CM(c,xj)] == O_NO || ao[CM(c,xj)] == O_NOL || ao[CM(c,xj)] == O_UNK);
		if :: ao[CM(c,xj)] == O_YES -> fr[c]++ :: else -> skip fi
	}
	xj = 0;
	st[c] = WAIT; bt[c] = BACKOFF;
	check(c)
}

/* the round ends: every call answered, or its deadline */
inline close(c) {
	yes = 0;
	for (xj : 0 .. N-1) {
		if
		:: aq[CM(c,xj)] == PENDY || aq[CM(c,xj)] == PENDN || aq[CM(c,xj)] == PENDNL -> ao[CM(c,xj)] = O_UNK
		:: aq[CM(c,xj)] == FLY -> ao[CM(c,xj)] = O_UNK;
#ifdef DELAY
			if :: lq[CM(c,xj)] == 0 -> lq[CM(c,xj)] = gen[c]+1; lt[CM(c,xj)] = STRAG;
#ifdef GRANT
				lv[CM(c,xj)] = cv[c]
#else
				skip
#endif
			   :: else -> skip fi
#endif
		:: else -> skip
		fi;
		aq[CM(c,xj)] = 0;
		/* GRANT_OLD: a grant heard for its value counts as a yes */
		if :: ao[CM(c,xj)] == O_YES || GN(c,xj) -> yes++ :: else -> skip fi
	}
	xj = 0;
	if
	:: yes >= Q ->
		yes = 0;
		hold(c)
	:: else ->
		yes = 0;
		printf("EV fail c=%d g=%d\n", c, gen[c]);
		/* rollback: a release where it said yes or did not answer */
		for (xt : 0 .. N-1) {
			if
			:: ao[CM(c,xt)] == O_YES -> RQYES(c) release(c, xt)
			:: ao[CM(c,xt)] == O_UNK -> rq[c] = 1; RBACK(c, xt)
			:: else -> skip
			fi
		}
		xt = 0;
		if
		:: !wst[c] -> st[c] = WSTART
		:: else -> settle(c)
#ifdef GRANT_HOLD
			/* H2: failed and rolled back: the grants heard count now */
			; ghold(c)
#endif
		fi
	fi;
	norm()
}

#define LOCK(c) \
	:: d_step { st[c] == IDLE -> printf("EV lock c=%d\n", c); attempt(c) }

/* the master applies the acquire, its reply comes at once */
#define AAPPLY(c,m) \
	:: d_step { aq[CM(c,m)] == FLY -> \
		acquire(c, gen[c], m, 0); printf("EV aapply c=%d m=%d g=%d r=%d\n", c, m, gen[c], xt); \
		ao[CM(c,m)] = (xt -> O_YES : REFUSED(m)); aq[CM(c,m)] = 0; xt = 0; \
		if :: aq[CM(c,0)] == 0 && aq[CM(c,1)] == 0 && aq[CM(c,2)] == 0 -> close(c) :: else -> skip fi }
/* SPLIT: applied, said yes, its reply later (or not before the deadline) */
#define AAPPLY_P(c,m) \
	:: d_step { aq[CM(c,m)] == FLY -> \
		acquire(c, gen[c], m, 0); \
		if :: xt -> aq[CM(c,m)] = PENDY; printf("EV aapply c=%d m=%d g=%d r=1 pend=1\n", c, m, gen[c]) \
		   :: else -> ao[CM(c,m)] = REFUSED(m); aq[CM(c,m)] = 0; printf("EV aapply c=%d m=%d g=%d r=0\n", c, m, gen[c]) fi; \
		xt = 0; \
		if :: aq[CM(c,0)] == 0 && aq[CM(c,1)] == 0 && aq[CM(c,2)] == 0 -> close(c) :: else -> skip fi }
/* SPLITNO: a refusal's reply, too, comes later (or not before the deadline) */
#define AAPPLY_PN(c,m) \
	:: d_step { aq[CM(c,m)] == FLY -> \
		acquire(c, gen[c], m, 0); \
		if :: xt -> aq[CM(c,m)] = PENDY; printf("EV aapply c=%d m=%d g=%d r=1 pend=1\n", c, m, gen[c]) \
		   :: else -> aq[CM(c,m)] = PREFUSED(m); printf("EV aapply c=%d m=%d g=%d r=0 pend=1\n", c, m, gen[c]) fi; \
		xt = 0 }
#define AREPLYN(c,m) \
	:: d_step { aq[CM(c,m)] == PENDN || aq[CM(c,m)] == PENDNL -> ao[CM(c,m)] = (aq[CM(c,m)] == PENDN -> O_NO : O_NOL); aq[CM(c,m)] = 0; printf("EV areply c=%d m=%d r=0\n", c, m); \
		if :: aq[CM(c,0)] == 0 && aq[CM(c,1)] == 0 && aq[CM(c,2)] == 0 -> close(c) :: else -> skip fi }
#define AREPLY(c,m) \
	:: d_step { aq[CM(c,m)] == PENDY -> ao[CM(c,m)] = O_YES; aq[CM(c,m)] = 0; printf("EV areply c=%d m=%d\n", c, m); \
		if :: aq[CM(c,0)] == 0 && aq[CM(c,1)] == 0 && aq[CM(c,2)] == 0 -> close(c) :: else -> skip fi }
#if LATES < 255
#define LATE_SPEND nlate++;
#else
#define LATE_SPEND
#endif
/* the round's deadline, calls unanswered */
#define DEADLINE(c) \
	:: d_step { st[c] == ATT && nlate < LATES && (aq[CM(c,0)] != 0 || aq[CM(c,1)] != 0 || aq[CM(c,2)] != 0) -> \
		LATE_SPEND printf("EV deadline c=%d\n", c); close(c) }
/* a late copy applies */
#define LAPPLY(c,m) \
	:: d_step { lq[CM(c,m)] != 0 -> \
		acquire(c, lq[CM(c,m)]-1, m, 1); printf("EV lapply c=%d m=%d g=%d\n", c, m, lq[CM(c,m)]-1); \
		lq[CM(c,m)] = 0; lt[CM(c,m)] = 0; xt = 0; norm() }

/* the watch starts (waitFor); with the fresh look, one more attempt at once */
#ifdef NO_FRESH
#define WATCH(c) \
	:: d_step { st[c] == WSTART -> wst[c] = 1; printf("EV watch c=%d\n", c); settle(c) }
#else
#define WATCH(c) \
	:: d_step { st[c] == WSTART -> wst[c] = 1; printf("EV watch c=%d fresh=1\n", c); attempt(c) }
#endif

#if defined(GRANT_OLD) || defined(GRANT_HOLD)
#define HEAR hearg
#define NOTE_NORM norm()
#elif defined(GRANT)
#define HEAR hear
#define NOTE_NORM norm()
#else
#define HEAR hear
#define NOTE_NORM skip
#endif
#ifdef ASYNCN
/* a notification arrives, or (LOSSN) is lost */
#define NOTE(m,c) \
	:: d_step { nt[MC(m,c)] != 0 -> xt = nt[MC(m,c)]; nt[MC(m,c)] = 0; HEAR(m, c, xt); xt = 0; NOTE_NORM }
#endif
#ifdef LOSSN
#define NLOST(m,c) \
	:: d_step { nt[MC(m,c)] != 0 -> nt[MC(m,c)] = 0; printf("EV nlost m=%d c=%d\n", m, c) }
#endif
#define WAKE(c) \
	:: d_step { st[c] == WAIT && wk[c] -> attempt(c) }

#define BACKOFF_WAKE(c) \
	:: d_step { st[c] == WAIT && bt[c] == 0 -> printf("EV backoff c=%d\n", c); attempt(c) }

/* Unlock: a release where the round said yes or did not answer (the
 * code's releasePlan); GRANT_OLD (or UNLOCK_ALL): to every master (those
 * that granted it, heard or not); GRANT_HOLD, held by grants (H5): the
 * counted masters too */
#if defined(GRANT_OLD) || defined(UNLOCK_ALL)
#define GRANTED(c,m) 1
#elif defined(GRANT_HOLD)
#define GRANTED(c,m) gc[CM(c,m)]
#else
#define GRANTED(c,m) 0
#endif
#define UNLOCK(c) \
	:: d_step { st[c] == HOLD -> printf("EV unlock c=%d\n", c); \
		for (xt : 0 .. N-1) { \
			if :: ao[CM(c,xt)] == O_YES || ao[CM(c,xt)] == O_UNK || GRANTED(c,xt) -> release(c, xt) :: else -> skip fi \
		} xt = 0; st[c] = DONE; norm() }

/* a waiting call gives up (ctx ended, WithMaxWait): LeaveQueue everywhere */
#define GIVEUP(c) \
	:: d_step { st[c] == WAIT && ngu < GIVEUPS -> ngu++; printf("EV giveup c=%d\n", c); \
		leaveq(c, gen[c], 0); leaveq(c, gen[c], 1); leaveq(c, gen[c], 2); st[c] = GONE; wst[c] = 0; norm() }
/* a waiting call's process dies: nothing more is sent (its late copies
 * are on the network already) */
#define DIE(c) \
	:: d_step { st[c] == WAIT && ndie < DIES -> ndie++; printf("EV die c=%d\n", c); st[c] = DEAD; wst[c] = 0; norm() }

/* ---- the clock ---- */

/* what must happen before the clock ticks: rounds end within their tick,
 * the watch starts, notifications arrive (or are lost), a backoff that
 * ran out retries, a holder unlocks */
#define DUE(c) || (st[c] == WAIT && wk[c]) || st[c] == ATT || st[c] == WSTART || (st[c] == WAIT && bt[c] == 0 && HAS_BACKOFF) || (st[c] == HOLD && hl[c] == 0)
#ifdef NO_BACKOFF
#define HAS_BACKOFF 0
#else
#define HAS_BACKOFF 1
#endif
#ifdef GRANT
/* a dead waiter's key expires (its TTL; no release, no notification) */
#define EXPIRE(m) \
	:: d_step { kv[m] != 0 && st[OWNER(kv[m])] == DEAD -> printf("EV expire m=%d\n", m); kv[m] = 0; mg[m] = 0 }
#define EXP_DUE || (kv[0] != 0 && st[OWNER(kv[0])] == DEAD) || (kv[1] != 0 && st[OWNER(kv[1])] == DEAD) || (kv[2] != 0 && st[OWNER(kv[2])] == DEAD)
#else
#define EXP_DUE
#endif
#if C == 2
#define FOR_C(X) X(0) X(1)
#else
#define FOR_C(X) X(0) X(1) X(2)
#endif
#define FOR_M(X,c) X(0,c) X(1,c) X(2,c)
#define FOR_CM(X) FOR_M(X,0) FOR_M(X,1) FOR_M(X,2)
#if C == 2
#undef FOR_CM
#define FOR_CM(X) FOR_M(X,0) FOR_M(X,1)
#endif
#define AAPPLY_MC(m,c) AAPPLY(c,m)
#define AAPPLY_P_MC(m,c) AAPPLY_P(c,m)
#define AREPLY_MC(m,c) AREPLY(c,m)
#define AAPPLY_PN_MC(m,c) AAPPLY_PN(c,m)
#define AREPLYN_MC(m,c) AREPLYN(c,m)
#define LAPPLY_MC(m,c) LAPPLY(c,m)

inline tick() {
#ifdef GRANT
	/* no key is left to a call that gave up or unlocked */
	for (xi : 0 .. N-1) {
		PROP("EV violate grant-released\n", !(kv[xi] != 0 && (st[OWNER(kv[xi])] == GONE || st[OWNER(kv[xi])] == DONE)))
	}
#if defined(GRANT_HOLD) && !defined(NO_HOLDS)
	/* a holder's value is still on a quorum of masters */
	for (xi : 0 .. C-1) {
		PROP("EV violate holds\n", !(st[xi] == HOLD && (kv[0] == KV(xi)) + (kv[1] == KV(xi)) + (kv[2] == KV(xi)) < Q))
	}
#endif
#endif
	for (xi : 0 .. N*C*2 - 1) {
		/* a live waiter's current entry does not expire: its backoff
		 * refreshes it well within the entry TTL */
		if
		:: en[xi] > 0 && !(CALLING((xi/2)%C) && (xi%2) == gen[(xi/2)%C]) -> en[xi]--
		:: else -> skip
		fi;
		if :: tb[xi] > 0 -> tb[xi]-- :: else -> skip fi
	}
	for (xi : 0 .. C*N - 1) {
		if :: lq[xi] != 0 -> lt[xi]--; if :: lt[xi] == 0 -> lq[xi] = 0 :: else -> skip fi :: else -> skip fi
	}
	for (xi : 0 .. C-1) {
		if :: st[xi] == WAIT && bt[xi] > 0 -> bt[xi]-- :: else -> skip fi;
		if :: st[xi] == HOLD && hl[xi] > 0 -> hl[xi]-- :: else -> skip fi
#ifdef VALID
		; if :: CALLING(xi) && ag[xi] < VALID -> ag[xi]++ :: else -> skip fi
#endif
	}
	xi = 0;
	TKA;
	norm()
}

#ifdef ASYNCN
#define NOTE_PENDING(m,c) || nt[MC(m,c)] != 0
#else
#define NOTE_PENDING(m,c)
#endif

proctype world()
{
	byte xi, xj, xk, xt, hc, hg, yes, news;
#ifdef RDELAY
	byte xp;
#endif
	do
	:: d_step { !(0 FOR_C(DUE) FOR_CM(NOTE_PENDING) FOR_CM(PR_PENDING) EXP_DUE) -> tick(); printf("EV tick\n") }
	FOR_C(LOCK)
#ifdef SPLIT
	FOR_CM(AAPPLY_P_MC)
	FOR_CM(AREPLY_MC)
#ifdef SPLITNO
	FOR_CM(AAPPLY_PN_MC)
	FOR_CM(AREPLYN_MC)
#endif
#else
	FOR_CM(AAPPLY_MC)
#endif
#if defined(SPLIT) || defined(DELAY)
	FOR_C(DEADLINE)
#endif
#ifdef DELAY
	FOR_CM(LAPPLY_MC)
#endif
	FOR_C(WATCH)
	FOR_C(WAKE)
#ifdef ASYNCN
	FOR_CM(NOTE)
#endif
#ifdef LOSSN
	FOR_CM(NLOST)
#endif
#ifdef RDELAY
	FOR_CM(RAPPLY_MC)
#endif
#ifdef GRANT
	EXPIRE(0) EXPIRE(1) EXPIRE(2)
#endif
#ifndef NO_BACKOFF
	FOR_C(BACKOFF_WAKE)
#endif
	FOR_C(UNLOCK)
#if GIVEUPS > 0
	FOR_C(GIVEUP)
#endif
#if DIES > 0
	FOR_C(DIE)
#endif
	od
}

#ifdef LIVE
/* every Lock call ends (granted, or given up / dead), provided the clock
 * keeps ticking: what must happen within a tick happens before the next
 * one (DUE), so a run with infinitely many ticks is a fair one */
#define w0 (st[0] == ATT || st[0] == WSTART || st[0] == WAIT)
#define w1 (st[1] == ATT || st[1] == WSTART || st[1] == WAIT)
#define w2 (st[2] == ATT || st[2] == WSTART || st[2] == WAIT)
#if C == 2
ltl granted { ([]<> tka && []<> !tka) -> ([] (w0 -> <> !w0) && [] (w1 -> <> !w1)) }
#else
ltl granted { ([]<> tka && []<> !tka) -> ([] (w0 -> <> !w0) && [] (w1 -> <> !w1) && [] (w2 -> <> !w2)) }
#endif
#endif

init {
	printf("EV start N=%d C=%d ETTL=%d STRAG=%d BACKOFF=%d FAIR=%d\n", N, C, ETTL, STRAG, BACKOFF, FAIR);
	run world()
}
