/*
 * The lock shapes' quorums (docs/shapes.md) for SPIN: a counting semaphore
 * (SEM: K places) or a read-write lock (RW: client 0 writes, the others
 * read) over three masters, three clients, one attempt each, time in ticks
 * as in redlock.pml (its conventions and EV lines; faultinject/sim reads
 * both).
 *
 * Each master keeps a set of holds, each with its own expiry; it admits a
 * semaphore hold while fewer than K are live, a write hold when no hold is
 * live, a read hold when no write hold is live. A client decides at its
 * shape's quorum: a semaphore's is max(N/2+1, N*K/(K+1)+1) (3 for N=3 and
 * K=2), NO_SHAPE_QUORUM (knobs.NoShapeQuorum) keeps the majority.
 *
 * Faults (-D): DELAY (requests outlive their round), FAST (masters' clocks
 * fast within the allowance), RESTARTS=n (restarts with their data).
 */

#define N 3
#define C 3
#define NA 3		/* one attempt per client: attempt i is client i's */
#ifndef TTL
#define TTL 4
#endif
#ifndef DRIFT
#define DRIFT 1
#endif
#ifndef K
#define K 2
#endif
#ifndef RESTARTS
#define RESTARTS 0
#endif

#ifdef SEM
#ifdef NO_SHAPE_QUORUM
#define SQ 2
#else
#define SQ ((N*K/(K+1)+1) > 2 -> (N*K/(K+1)+1) : 2)
#endif
#else
#define SQ 2		/* a read-write lock decides at the majority */
#endif

#define IM(i,m) ((i)*N+(m))
#define WRITER(i) ((i) == 0)

#define IDLE 0
#define BUSY 1
#define HOLD 2
#define DONE 3

#define FLY 1
#define O_UNK 1
#define O_YES 2
#define O_NO 3

#define PROP(msg, cond) \
	if :: !(cond) -> printf(msg); assert(cond) \
	   :: else -> skip fi

byte hl[NA*N];		/* hold of attempt i on master m: ticks left, 0 none */
byte md[N];
byte nrest;
byte aq[NA*N], ao[NA*N];
byte sl[NA];
byte st[C], ay[C], an[C];
bit g[C];
byte vl[C];
bit dec[C];
byte nopen, rk[C];	/* open rounds ranked by age: deadlines come in order */
#define SHIFT(c,r) if :: st[c] == BUSY && rk[c] > r -> rk[c]-- :: else -> skip fi;
#define SHUT(r) SHIFT(0,r) SHIFT(1,r) SHIFT(2,r) nopen--; r = 0;

#define LIVE(i,m) (hl[IM(i,m)] > 0)
#define COUNT(m) (LIVE(0,m) + LIVE(1,m) + LIVE(2,m))
#ifdef SEM
#define ADMIT(i,m) (COUNT(m) < K)
#else
/* a writer needs no live hold; a reader no live write hold */
#define ADMIT(i,m) (WRITER(i) -> COUNT(m) == 0 : !LIVE(0,m))
#endif

#define VALID(c) (g[c] && vl[c] > 0)
#define NVALID (VALID(0) + VALID(1) + VALID(2))
#ifdef SEM
#define SHAPE_OK PROP("EV violate semaphore-bound\n", NVALID <= K)
#else
#define SHAPE_OK PROP("EV violate mutual-exclusion\n", !(VALID(0) && (VALID(1) || VALID(2))))
#endif

#define FOR_C(X) X(0) X(1) X(2)
#define FOR_M(X) X(0) X(1) X(2)
#define FOR_IM(X) X(0,0) X(0,1) X(0,2) X(1,0) X(1,1) X(1,2) X(2,0) X(2,1) X(2,2)

#define LOCK(c) \
	:: d_step { st[c] == IDLE -> \
		printf("EV lock c=%d i=%d\n", c, c); \
		st[c] = BUSY; rk[c] = nopen; nopen++; ay[c] = 0; an[c] = 0; dec[c] = 0; sl[c] = TTL-1; \
		aq[IM(c,0)] = FLY; aq[IM(c,1)] = FLY; aq[IM(c,2)] = FLY; \
		ao[IM(c,0)] = O_UNK; ao[IM(c,1)] = O_UNK; ao[IM(c,2)] = O_UNK }

/* acquire_hold.lua: admit while the shape allows; yes if held already */
#define AAPPLY(i,m) \
	:: d_step { aq[IM(i,m)] == FLY -> \
		aq[IM(i,m)] = 0; \
		if :: LIVE(i,m) || ADMIT(i,m) -> hl[IM(i,m)] = TTL - md[m]; t = 1 \
		   :: else -> t = 0 fi; \
		printf("EV aapply i=%d m=%d r=%d\n", i, m, t); \
		if :: st[i] == BUSY -> \
			if :: t == 1 -> ao[IM(i,m)] = O_YES; ay[i]++ \
			   :: else -> ao[IM(i,m)] = O_NO; an[i]++ fi; \
			printf("EV areply i=%d m=%d o=%d\n", i, m, ao[IM(i,m)]); \
			if :: !dec[i] && ay[i] >= SQ -> \
				dec[i] = 1; SHAPE_GRANT(i) \
			   :: else -> skip fi; \
			if :: aq[IM(i,0)] == 0 && aq[IM(i,1)] == 0 && aq[IM(i,2)] == 0 -> CLOSE_BODY(i) \
			   :: else -> skip fi \
		   :: else -> skip fi; \
		t = 0 }

#define SHAPE_GRANT(i) \
	g[i] = 1; vl[i] = TTL - DRIFT; \
	SHAPE_OK; \
	printf("EV grant c=%d i=%d tok=0 valid=%d\n", i, i, TTL - DRIFT);

/* release_hold.lua: every call that may hold ours (yes or unknown) */
#define REL(i,m) \
	if :: ao[IM(i,m)] == O_YES || ao[IM(i,m)] == O_UNK -> \
		hl[IM(i,m)] = 0; printf("EV rapply i=%d m=%d\n", i, m) \
	   :: else -> skip fi; ao[IM(i,m)] = 0;

#ifdef DELAY
#define STRAGGLE(i,m) skip
#else
#define STRAGGLE(i,m) aq[IM(i,m)] = 0
#endif
#define CLOSE_BODY(i) \
	STRAGGLE(i,0); STRAGGLE(i,1); STRAGGLE(i,2); st[i] = HOLD; SHUT(rk[i]) \
	printf("EV close c=%d i=%d dec=%d\n", i, i, (dec[i] -> 3 : 2)); \
	if :: dec[i] -> st[i] = HOLD \
	   :: else -> printf("EV fail c=%d i=%d\n", i, i); REL(i,0) REL(i,1) REL(i,2) st[i] = DONE fi;
#define CLOSE(i) :: d_step { st[i] == BUSY && rk[i] == 0 -> printf("EV deadline c=%d i=%d\n", i, i); CLOSE_BODY(i) }

#define UNLOCK(i) \
	:: d_step { st[i] == HOLD -> \
		g[i] = 0; vl[i] = 0; printf("EV unlock c=%d i=%d\n", i, i); \
		REL(i,0) REL(i,1) REL(i,2) st[i] = DONE }

#define RESTART(m) \
	:: d_step { nrest < RESTARTS -> nrest++; \
		if :: aq[IM(0,m)] == FLY -> aq[IM(0,m)] = 0 :: else -> skip fi; \
		if :: aq[IM(1,m)] == FLY -> aq[IM(1,m)] = 0 :: else -> skip fi; \
		if :: aq[IM(2,m)] == FLY -> aq[IM(2,m)] = 0 :: else -> skip fi; \
		printf("EV restart m=%d keep=1\n", m) }

#define DEC(x) if :: x > 0 -> x-- :: else -> skip fi;
#define TICK_IM(i,m) DEC(hl[IM(i,m)]) if :: aq[IM(i,m)] == FLY && sl[i] <= 1 -> aq[IM(i,m)] = 0 :: else -> skip fi;
#define TICK_C(c) DEC(vl[c]) DEC(sl[c])

proctype world()
{
	byte t;
	do
	:: d_step { st[0] != BUSY && st[1] != BUSY && st[2] != BUSY ->
		FOR_IM(TICK_IM) FOR_C(TICK_C) printf("EV tick\n") }
	FOR_C(LOCK)
	FOR_IM(AAPPLY)
	FOR_C(CLOSE)
	FOR_C(UNLOCK)
#if RESTARTS > 0
	FOR_M(RESTART)
#endif
	:: d_step { st[0] == DONE && st[1] == DONE && st[2] == DONE -> printf("EV end\n") }; break
	od
}

init {
	atomic {
#ifdef SEM
		printf("EV start N=%d C=%d A=1 TTL=%d DRIFT=%d shape=semaphore K=%d\n", N, C, TTL, DRIFT, K);
#else
		printf("EV start N=%d C=%d A=1 TTL=%d DRIFT=%d shape=rw\n", N, C, TTL, DRIFT);
#endif
#ifdef FAST
		if :: md[0] = DRIFT; printf("EV fast m=0 d=%d\n", DRIFT) :: skip fi;
		if :: md[1] = DRIFT; printf("EV fast m=1 d=%d\n", DRIFT) :: skip fi;
		if :: md[2] = DRIFT; printf("EV fast m=2 d=%d\n", DRIFT) :: skip fi;
#endif
		run world()
	}
}
