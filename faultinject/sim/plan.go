// Package sim is a deterministic simulator for the real redlock coordinator:
// it runs redlock.Client code unchanged over in-memory masters (memnode) and
// a simulated network inside a testing/synctest bubble, under fault
// schedules generated from one seed, and checks the lock's invariants on
// every schedule. See docs/simulation.md.
//
// Run must be called inside a synctest bubble (synctest.Test): the
// coordinator, the masters and the network all read the time package, so
// a schedule of several virtual seconds runs in milliseconds.
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Family selects which faults and workloads a schedule draws from.
type Family string

// The schedule families. Mixed draws everything; the others focus on the
// faults that one safety mechanism exists for (see Knob).
const (
	Mixed      Family = "mixed"      // every fault kind, every option
	Stragglers Family = "stragglers" // delayed requests and reply spikes (release guard)
	Cancels    Family = "cancels"    // callers cancelled mid-acquire on slow links (detached rollback)
	FastClocks Family = "fastclocks" // masters' clocks fast, within the drift allowance
	Restarts   Family = "restarts"   // restarts without keys, asymmetric cuts, quarantine on; power cuts losing the AOF tail
	Fences     Family = "fences"     // fencing across shifting quorums, client pauses; power cuts losing the AOF tail
	Shapes     Family = "shapes"     // reentrant, read-write and semaphore locks under mixed faults
	// What independent probes found and a million schedules of the
	// families above did not.
	Late    Family = "late"    // a majority restarts empty (its clocks stepped at boot); clients that first meet it after (restart quarantine)
	Aliases Family = "aliases" // one server listed twice, restarting between its addresses' first contacts
	Leaks   Family = "leaks"   // paused masters whose accept queue fills; Do functions that panic
	// The host faults of the chaos suite's second round.
	Strobes Family = "strobes" // every master's clock strobing within the drift allowance
	Disks   Family = "disks"   // masters' disks full (writes refused with MISCONF) among mixed faults
	// The online change of the masters (issue 31).
	Reconfig Family = "reconfig" // two of five masters replaced one step at a time while clients load each configuration late
)

// Families lists every family, in a fixed order (new families go last, so
// that a seed's family in a run of all of them is what it was before).
var Families = []Family{Mixed, Stragglers, Cancels, FastClocks, Restarts, Fences, Shapes, Late, Aliases, Leaks, Strobes, Disks, Reconfig}

// ShapeKind is the kind of lock on one name (docs/shapes.md).
type ShapeKind int

// Lock kinds: the plain mutex (every family but Shapes), and the shapes.
const (
	MutexLock ShapeKind = iota
	ReentrantLock
	RWLock
	SemaphoreLock
)

func (k ShapeKind) String() string { return [...]string{"mutex", "reentrant", "rw", "semaphore"}[k] }

// Shape is the lock on one name.
type Shape struct {
	Kind   ShapeKind
	K      int  // SemaphoreLock: places
	Prefer bool // RWLock: WithWriterPreference
}

func (s Shape) String() string {
	switch {
	case s.Kind == SemaphoreLock:
		return fmt.Sprintf("semaphore(K=%d)", s.K)
	case s.Kind == RWLock && s.Prefer:
		return "rw(writer preference)"
	}
	return s.Kind.String()
}

// quorum is the number of masters a valid lease of this shape holds on
// (docs/shapes.md): a majority, or for a semaphore max(majority,
// N*K/(K+1)+1).
func (s Shape) quorum(n int) int {
	q := n/2 + 1
	if s.Kind == SemaphoreLock {
		q = max(q, n*s.K/(s.K+1)+1)
	}
	return q
}

// FaultKind is one kind of fault a schedule can inject.
type FaultKind int

// Fault kinds. Link-level weather (delays, drops) is drawn per call and
// counted under NetDelay, NetSpike, DropRequest and DropReply.
const (
	MasterPause FaultKind = iota
	MasterCrash
	RestartKeep
	RestartEmpty
	ClockJump
	DriftWithin
	DriftBeyond
	Partition // one client cut from some masters (asymmetric)
	Isolate   // one master cut from every client
	SlowLink  // one client-master link slowed past the node timeout
	ClientPause
	CallerCancel
	NetDelay
	NetSpike
	DropRequest
	DropReply
	// LateClient: a client (a new process) that first contacts the masters
	// at At, its warm-up then, its workers after.
	LateClient
	// AliasAddr: Master listed a second time (another spelling of its
	// address) in every client, unreachable until At: its first contacts
	// come after At.
	AliasAddr
	// BacklogPause: a master paused for Dur whose accept queue is full
	// Delay after the pause began: from then on a call that needs a new
	// connection times out on its dial, while calls on connections already
	// open are queued and run at resume.
	BacklogPause
	// DoPanic: a worker's Mutex.Do whose function panics (the worker
	// recovers it); drawn per acquisition with Plan.DoPanicP.
	DoPanic
	// CrashAOFTail: a power cut on Master's host at At, down for Dur, with
	// appendfsync everysec: the restart brings back the keyspace as of
	// Delay (under 1s) before the cut, the writes of that last second lost
	// (memnode Checkpoint then RestartFromCheckpoint). Its fencing counters
	// come back older than some it wrote back (issue 32, S1). Families
	// Fences and Restarts, drawn from hostStream. A trail's replay
	// (ParseTrail) also steps its clock forward by Jump as it comes back
	// (0 in a plan).
	CrashAOFTail
	// BootClockStep: Master restarts without its keys at At and its clock
	// steps forward by Jump at once, as chrony's makestep does at boot: the
	// new run's INFO uptime_in_seconds reads Jump too old (issue 32, S2).
	// No key exists yet for the step to expire early, so it breaks no
	// assumption. Family Late, drawn from hostStream.
	BootClockStep
	// ClockStrobe: Master's clock flips between real time + Jump and real
	// time - Jump every Delay, from At for Dur, as faultinject.ClockStrobe
	// does: a key set while it reads behind and judged while it reads ahead
	// expires 2*Jump early. Family Strobes draws 2*Jump within the drift
	// allowance.
	ClockStrobe
	// DiskFull: Master's disk is full from At for Dur (memnode.SetDiskFull):
	// every command that would write is refused with a MISCONF error
	// reply, as a Redis with appendfsync everysec refuses it. Family Disks.
	DiskFull
	numKinds
)

var kindNames = [...]string{"pause", "crash", "restart-keep", "restart-empty", "clock-jump",
	"drift-within", "drift-beyond", "partition", "isolate", "slow-link", "client-pause",
	"caller-cancel", "net-delay", "net-spike", "drop-request", "drop-reply",
	"late-client", "alias", "backlog-pause", "do-panic", "crash-aof-tail", "boot-clock-step",
	"clock-strobe", "disk-full"}

func (k FaultKind) String() string { return kindNames[k] }

// Fault is one planned fault: it starts At (since the schedule's start) and,
// where it has one, lasts Dur.
type Fault struct {
	At, Dur time.Duration
	Kind    FaultKind
	Master  int
	Client  int
	Cut     []int // Partition: the masters the client cannot reach
	Jump    time.Duration
	Rate    float64
	Delay   time.Duration // SlowLink; BacklogPause: queue full after; CrashAOFTail: last fsync before At; ClockStrobe: the period
}

func (f Fault) String() string {
	s := fmt.Sprintf("%v@%v", f.Kind, f.At)
	switch f.Kind {
	case MasterPause, MasterCrash, Isolate:
		s += fmt.Sprintf(" m%d for %v", f.Master, f.Dur)
	case BacklogPause:
		s += fmt.Sprintf(" m%d for %v, accept queue full after %v", f.Master, f.Dur, f.Delay)
	case LateClient:
		s += fmt.Sprintf(" c%d", f.Client)
	case AliasAddr:
		s += fmt.Sprintf(" m%d listed twice, second address reachable from here", f.Master)
	case RestartKeep, RestartEmpty:
		s += fmt.Sprintf(" m%d", f.Master)
	case ClockJump:
		s += fmt.Sprintf(" m%d +%v", f.Master, f.Jump)
	case CrashAOFTail:
		s += fmt.Sprintf(" m%d for %v, last fsync %v before", f.Master, f.Dur, f.Delay)
		if f.Jump > 0 {
			s += fmt.Sprintf(", clock stepped +%v at boot", f.Jump)
		}
	case BootClockStep:
		s += fmt.Sprintf(" m%d, clock stepped +%v at boot", f.Master, f.Jump)
	case ClockStrobe:
		s += fmt.Sprintf(" m%d ±%v every %v for %v", f.Master, f.Jump, f.Delay, f.Dur)
	case DiskFull:
		s += fmt.Sprintf(" m%d for %v", f.Master, f.Dur)
	case DriftWithin, DriftBeyond:
		s += fmt.Sprintf(" m%d rate %.4f", f.Master, f.Rate)
	case Partition:
		s += fmt.Sprintf(" c%d from %v for %v", f.Client, f.Cut, f.Dur)
	case SlowLink:
		s += fmt.Sprintf(" c%d-m%d +%v for %v", f.Client, f.Master, f.Delay, f.Dur)
	}
	return s
}

// Net is a schedule's network weather, drawn per call on every link.
type Net struct {
	BaseMax    time.Duration // each direction: uniform in [0, BaseMax]
	SpikeP     float64       // chance of an extra uniform [0, SpikeMax]
	SpikeMax   time.Duration
	DropReqP   float64 // request lost (the caller times out, nothing applies)
	DropReplyP float64 // reply lost after the command applied
}

// Plan is a whole schedule, drawn from its seed before anything runs.
type Plan struct {
	Seed    uint64
	Family  Family
	Masters int
	Clients int
	Workers int // goroutines per client competing for the locks
	Names   []string
	TTL     time.Duration
	Delay   time.Duration // WithLockDelay
	Drift   float64
	MaxIn   int // WithMaxInFlight
	Fencing bool
	Quar    bool // WithRestartQuarantine(0)
	Renew   bool // WithAutoRenew (its jitter is redlock's, unseeded)
	// LockRetry makes workers call Lock, whose retry backoff jitter is
	// redlock's own, unseeded; otherwise they call TryLock and back off on
	// the schedule's random stream. Either keeps a schedule from replaying
	// the identical interleaving (see docs/simulation.md).
	LockRetry bool
	Duration  time.Duration
	Net       Net
	PauseP    float64 // chance a holding pauses past its validity before a write
	CancelP   float64 // chance a Lock call gets a short deadline
	Faults    []Fault
	// Shapes: the lock on each name (family Shapes; nil: every name is a
	// mutex). Owners: each client's reentrant owner (clients may share one:
	// re-entry works across processes).
	Shapes []Shape
	Owners []int
	// DoPanicP: chance that a worker's acquisition is a Mutex.Do whose
	// function panics (family Leaks; redlock's retry jitter, unseeded).
	DoPanicP float64
	// Fair: the mutexes use WithFairQueue (names whose shape is a mutex;
	// the shapes have no fair queue). Drawn in family Mixed only, from a
	// stream of its own (fairStream, see drawFair), so that a plan without
	// it is exactly the plan its seed drew before the fair queue existed.
	Fair bool
	// Change: the masters change during the run (family Reconfig; nil:
	// they do not). Drawn from a stream of its own (drawChange).
	Change *Change
}

// fairStream seeds the random stream Plan.Fair is drawn from, apart from
// the plan's main stream.
const fairStream = 0xfa17

// fairOneIn: one mixed schedule in fairOneIn uses the fair queue.
const fairOneIn = 4

// drawFair draws Plan.Fair for seed in family f: one mixed schedule in
// fairOneIn, no schedule of another family. Half the fair schedules also
// turn LockRetry on (a queue forms only behind waiting Lock calls; TryLock
// enters and leaves it at once).
func drawFair(seed uint64, f Family) (fair, lockRetry bool) {
	if f != Mixed {
		return false, false
	}
	r := rand.New(rand.NewPCG(seed, fairStream))
	fair = r.IntN(fairOneIn) == 0
	return fair, fair && r.IntN(2) == 0
}

// late returns when client c first contacts the masters (since the
// schedule's start), and whether it is a late client at all.
func (p Plan) late(c int) (time.Duration, bool) {
	for _, f := range p.Faults {
		if f.Kind == LateClient && f.Client == c {
			return f.At, true
		}
	}
	return 0, false
}

// hasAny reports whether the plan has a fault of one of kinds.
func (p Plan) hasAny(kinds []FaultKind) bool {
	return slices.ContainsFunc(p.Faults, func(f Fault) bool { return slices.Contains(kinds, f.Kind) })
}

// aliases lists the faults that list a server a second time.
func (p Plan) aliases() []Fault {
	var out []Fault
	for _, f := range p.Faults {
		if f.Kind == AliasAddr {
			out = append(out, f)
		}
	}
	return out
}

// addrs is how many addresses each client lists: one per master, and the
// aliases.
func (p Plan) addrs() int { return p.Masters + len(p.aliases()) }

// shape is the lock on name i.
func (p Plan) shape(i int) Shape {
	if p.Shapes == nil {
		return Shape{}
	}
	return p.Shapes[i]
}

// waitTTL is how long a writer's waiting mark lives (docs/shapes.md):
// twice the retry backoff maximum plus node and release timeouts.
const waitTTL = 2 * (retryMax + nodeTimeout + releaseTimeout)

// Virtual-time constants of the world.
const (
	nodeTimeout    = 50 * time.Millisecond
	releaseTimeout = 100 * time.Millisecond
	retryMin       = 5 * time.Millisecond
	retryMax       = 50 * time.Millisecond
)

// NewPlan draws the schedule for seed in family f: the plan's main stream
// (drawPlan), then the draws added later from streams of their own
// (drawFair, drawHostFaults), so that those did not move any earlier draw.
func NewPlan(seed uint64, f Family) Plan {
	p := drawPlan(seed, f)
	fair, lockRetry := drawFair(seed, f)
	p.Fair, p.LockRetry = fair, p.LockRetry || lockRetry
	p.drawHostFaults(seed)
	p.drawChange(seed)
	return p
}

// drawPlan draws the plan's main stream: the whole plan as it was before
// the fair queue and the host faults existed.
func drawPlan(seed uint64, f Family) Plan {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	p := Plan{Seed: seed, Family: f}
	p.Masters = []int{3, 3, 5}[r.IntN(3)]
	p.Clients = 2 + r.IntN(3)
	p.Workers = 1 + r.IntN(2)
	nNames := 1 + r.IntN(3)
	for i := range nNames {
		p.Names = append(p.Names, fmt.Sprintf("lock-%d", i))
	}
	p.TTL = []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	if r.IntN(4) == 0 {
		p.Delay = time.Duration(r.IntN(200)) * time.Millisecond
	}
	p.Drift = []float64{0.01, 0.01, 0.05}[r.IntN(3)]
	p.MaxIn = []int{16, 16, 2}[r.IntN(3)]
	p.Fencing = r.IntN(2) == 0
	p.Quar = r.IntN(4) != 0
	p.Renew = r.IntN(8) == 0
	p.LockRetry = r.IntN(8) == 0
	p.Duration = time.Duration(2+r.IntN(3)) * time.Second
	p.Net = Net{BaseMax: time.Duration(r.IntN(3000)) * time.Microsecond}
	if r.IntN(2) == 0 {
		p.Net.SpikeP = 0.02 + 0.1*r.Float64()
		p.Net.SpikeMax = time.Duration(20+r.IntN(200)) * time.Millisecond
	}
	if r.IntN(3) == 0 {
		p.Net.DropReqP = 0.05 * r.Float64()
		p.Net.DropReplyP = 0.05 * r.Float64()
	}
	if p.Fencing && r.IntN(2) == 0 || r.IntN(8) == 0 {
		p.PauseP = 0.1 + 0.2*r.Float64()
	}
	if r.IntN(3) == 0 {
		p.CancelP = 0.1 + 0.3*r.Float64()
	}
	// Faults that break a documented assumption (a forward jump, a rate
	// beyond the allowance, a restart without keys and no quarantine) are
	// drawn rarely, so that most schedules are judged.
	kinds := []FaultKind{MasterPause, MasterPause, MasterCrash, RestartKeep, RestartEmpty,
		DriftWithin, DriftWithin, Partition, Partition, Partition, Isolate, SlowLink, SlowLink}
	if r.IntN(8) == 0 {
		kinds = append(kinds, ClockJump, DriftBeyond)
	}
	nFaults := r.IntN(6)
	switch f {
	case Stragglers:
		p.Net.SpikeP = 0.1 + 0.3*r.Float64()
		p.Net.SpikeMax = time.Duration(60+r.IntN(200)) * time.Millisecond
		p.Net.BaseMax = time.Duration(r.IntN(20000)) * time.Microsecond
		p.TTL = time.Second
		kinds = []FaultKind{MasterPause, SlowLink, Partition}
	case Cancels:
		p.CancelP = 0.5 + 0.5*r.Float64()
		p.Net.BaseMax = time.Duration(5000+r.IntN(30000)) * time.Microsecond
		p.TTL = time.Second
		kinds = []FaultKind{MasterPause, SlowLink}
	case FastClocks:
		p.Clients = 3 + r.IntN(2)
		p.PauseP, p.Fencing, p.Quar = 0, false, false
		kinds = []FaultKind{DriftWithin}
		nFaults = p.Masters
	case Restarts:
		p.Quar = true
		p.Delay = 0
		kinds = []FaultKind{RestartEmpty, RestartEmpty, Partition, Partition, MasterCrash}
		nFaults = 2 + r.IntN(5)
	case Fences:
		p.Fencing = true
		p.PauseP = 0.2 + 0.3*r.Float64()
		kinds = []FaultKind{Partition, Partition, Isolate, MasterPause, RestartKeep}
		nFaults = 2 + r.IntN(5)
	case Shapes:
		// Every fault kind, as mixed; no fencing (not offered for the
		// shapes); more workers, fewer names, so that holders meet.
		p.Fencing = false
		if p.PauseP > 0 && r.IntN(2) == 0 {
			p.PauseP = 0
		}
		p.Clients = 3 + r.IntN(2)
		p.Workers = 2
		p.Names = []string{"lock-0", "lock-1"}[:1+r.IntN(2)]
		for range p.Names {
			sh := Shape{Kind: ReentrantLock + ShapeKind(r.IntN(3))}
			switch sh.Kind {
			case RWLock:
				sh.Prefer = r.IntN(2) == 0
			case SemaphoreLock:
				sh.K = 2 + r.IntN(2)
			}
			p.Shapes = append(p.Shapes, sh)
		}
		for range p.Clients {
			p.Owners = append(p.Owners, r.IntN(p.Clients))
		}
	case Late:
		// Restarts as the restarts family, plus clients that meet the
		// restarted masters for the first time (below).
		p.Quar = true
		p.Delay = 0
		p.Clients = 3 + r.IntN(2)
		kinds = []FaultKind{RestartEmpty, Partition, Partition}
		nFaults = r.IntN(3)
	case Aliases:
		// One vote per server: no quarantine (its read after each vote
		// would also see one run behind two addresses), restarts keep
		// their keys, so every lease's coverage is judged.
		p.Quar = false
		kinds = []FaultKind{MasterPause, Partition, SlowLink}
		nFaults = r.IntN(3)
	case Leaks:
		p.Clients = 3 + r.IntN(2)
		p.DoPanicP = 0.1 + 0.2*r.Float64()
		kinds = []FaultKind{BacklogPause, BacklogPause, MasterPause, SlowLink}
		nFaults = r.IntN(3)
	case Strobes:
		// Every master's clock strobes (as FastClocks makes every one
		// fast), each within half the drift allowance: no pause past the
		// validity, no quarantine, no lock delay (its promise is stretched
		// for a rate, not for an offset).
		p.Clients = 3 + r.IntN(2)
		p.PauseP, p.Quar, p.Delay = 0, false, 0
		kinds = []FaultKind{ClockStrobe}
		nFaults = p.Masters
	case Reconfig:
		// Seven masters, five at a time (drawChange): pauses, cuts, slow
		// links and restarts with their keys (repaired), fencing in half
		// (counters stamped with the epoch), no lock-delay, TTLs short
		// enough for four steps and their waits.
		p.Masters = 7
		p.Clients = 3 + r.IntN(2)
		p.TTL = []time.Duration{200 * time.Millisecond, 500 * time.Millisecond}[r.IntN(2)]
		p.Duration = 4 * time.Second
		p.Delay = 0
		kinds = []FaultKind{MasterPause, Partition, Partition, Isolate, SlowLink, RestartKeep}
		nFaults = r.IntN(4)
	case Disks:
		// Full disks (a minority or more at once) among ordinary faults.
		kinds = []FaultKind{DiskFull, DiskFull, DiskFull, MasterPause, Partition, SlowLink, RestartKeep}
		nFaults = 1 + r.IntN(5)
	}
	for range nFaults {
		k := kinds[r.IntN(len(kinds))]
		ft := Fault{Kind: k, At: time.Duration(r.Int64N(int64(p.Duration))), Master: r.IntN(p.Masters), Client: r.IntN(p.Clients)}
		ft.Dur = time.Duration(r.Int64N(int64(p.TTL*2))) + time.Millisecond
		switch k {
		case ClockJump:
			ft.Jump = time.Duration(r.Int64N(int64(p.TTL))) + time.Millisecond
		case DriftWithin:
			ft.Rate = 1 + r.Float64()*(p.safeRate()-1)
			if f == FastClocks {
				ft.Master = len(p.Faults) % p.Masters
				ft.At = 0
				ft.Rate = 1 + (0.5+0.5*r.Float64())*(p.safeRate()-1)
			}
		case DriftBeyond:
			ft.Rate = p.safeRate() * (1.01 + 0.5*r.Float64())
		case Partition:
			for m := range p.Masters {
				if r.IntN(2) == 0 {
					ft.Cut = append(ft.Cut, m)
				}
			}
			if len(ft.Cut) == 0 {
				ft.Cut = []int{ft.Master}
			}
		case SlowLink:
			ft.Delay = nodeTimeout + time.Duration(r.Int64N(int64(p.TTL)))
		case BacklogPause:
			ft.Dur, ft.Delay = p.backlogPause(r)
		case ClockStrobe:
			// Half the allowance at most: a key lives at least TTL minus
			// the allowance.
			half := p.driftAllowance() / 2
			ft.Master = len(p.Faults) % p.Masters
			ft.At = time.Duration(r.Int64N(int64(p.TTL)))
			ft.Dur = p.Duration
			ft.Jump = half/4 + time.Duration(r.Int64N(int64(half-half/4)+1))
			ft.Delay = time.Millisecond + time.Duration(r.Int64N(int64(9*time.Millisecond)))
		}
		p.Faults = append(p.Faults, ft)
	}
	switch f {
	case Late:
		// A bare majority of the masters restarts empty within 100 ms
		// (a rolling restart gone wrong, a zone outage), and one or two
		// clients meet the masters for the first time within a TTL after.
		at := p.TTL/2 + time.Duration(r.Int64N(int64(p.Duration-p.TTL)))
		for _, m := range r.Perm(p.Masters)[:p.Masters/2+1] {
			p.Faults = append(p.Faults, Fault{Kind: RestartEmpty, Master: m, At: at + time.Duration(r.Int64N(int64(100*time.Millisecond)))})
		}
		for c := range 1 + r.IntN(p.Clients-2) {
			p.Faults = append(p.Faults, Fault{Kind: LateClient, Client: p.Clients - 1 - c, At: at + time.Duration(r.Int64N(int64(p.TTL)))})
		}
	case Aliases:
		// The second address's first contacts come after the server
		// restarted (with its keys: a new run_id) since the first's.
		m := r.IntN(p.Masters)
		at := time.Duration(r.Int64N(int64(p.Duration / 2)))
		p.Faults = append(p.Faults, Fault{Kind: RestartKeep, Master: m, At: time.Duration(r.Int64N(int64(at) + 1))},
			Fault{Kind: AliasAddr, Master: m, At: at})
	case Disks:
		// A full disk on one master for the last tenth to third of a TTL
		// of the workload: the releases it refuses then, of keys set just
		// before, are retried only once it is freed, as the clients close,
		// while those keys are still alive.
		ft := Fault{Kind: DiskFull, Master: r.IntN(p.Masters)}
		ft.Dur = p.TTL/10 + time.Duration(r.Int64N(int64(p.TTL/3)))
		ft.At = p.Duration - ft.Dur
		p.Faults = append(p.Faults, ft)
	case Leaks:
		// A pause shorter than the TTL with a full accept queue that ends
		// with the workload, so that a straggler it applies at resume is
		// still there when the clients have closed.
		ft := Fault{Kind: BacklogPause, Master: r.IntN(p.Masters)}
		ft.Dur, ft.Delay = p.backlogPause(r)
		ft.At = p.Duration - ft.Dur
		p.Faults = append(p.Faults, ft)
	}
	slices.SortStableFunc(p.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	return p
}

// hostStream seeds the random stream the host faults (CrashAOFTail,
// BootClockStep) are drawn from, apart from the plan's main stream.
const hostStream = 0xb007

// hostOneIn: one schedule in hostOneIn of the families that have them
// gets host faults.
const hostOneIn = 2

// drawHostFaults adds the host faults of issue 32 to one schedule in
// hostOneIn of their families, from a stream of their own:
//
//   - Fences and Restarts: one power cut (CrashAOFTail) on one master up
//     to a bare majority (the hosts on one feed), down at once for up to
//     half a TTL and back at once, each from its own last fsync, less
//     than a second before the cut: the AOF's last second lost. The
//     quarantine is on (a master then lacks the lock keys written after
//     its last fsync, as after a restart without keys). The cut comes at
//     least TTL + 2 lock delays before the workload's end, so that the
//     keys it brings back (released since, perhaps) have expired when the
//     orphan check runs. A cut on a bare majority leaves the last tokens
//     on the minority alone; no quorum forms until the majority's
//     quarantine is over, and then a quorum of restored counters may hand
//     out the next token.
//   - Late: every restart without keys is a BootClockStep, its clock
//     stepped forward 30 s to 2 min at boot (the hosts of a zone rebooting
//     with their clocks behind).
func (p *Plan) drawHostFaults(seed uint64) {
	r := rand.New(rand.NewPCG(seed, hostStream))
	switch p.Family {
	case Fences, Restarts:
		if r.IntN(hostOneIn) != 0 {
			return
		}
		p.Quar = true
		latest := p.Duration - p.TTL - 2*p.Delay
		at := time.Millisecond + time.Duration(r.Int64N(int64(latest-time.Millisecond)))
		down := time.Millisecond + time.Duration(r.Int64N(int64(p.TTL/2)))
		for _, m := range r.Perm(p.Masters)[:1+r.IntN(p.Masters/2+1)] {
			lag := min(time.Millisecond+time.Duration(r.Int64N(int64(time.Second-time.Millisecond))), at)
			p.Faults = append(p.Faults, Fault{Kind: CrashAOFTail, Master: m, At: at, Dur: down, Delay: lag})
		}
	case Late:
		if r.IntN(hostOneIn) != 0 {
			return
		}
		for i, f := range p.Faults {
			if f.Kind == RestartEmpty {
				p.Faults[i].Kind = BootClockStep
				p.Faults[i].Jump = 30*time.Second + time.Duration(r.Int64N(int64(90*time.Second)))
			}
		}
	default:
		return
	}
	slices.SortStableFunc(p.Faults, func(a, b Fault) int { return int(a.At - b.At) })
}

// backlogPause draws a BacklogPause's length (0.5 to 0.95 TTL, as the
// probes paused) and when its accept queue is full (within the
// first half of the pause: about a second under four clients on a real
// Redis, whose default backlog is 511).
func (p Plan) backlogPause(r *rand.Rand) (dur, full time.Duration) {
	dur = time.Duration(float64(p.TTL) * (0.5 + 0.45*r.Float64()))
	return dur, time.Duration(r.Int64N(int64(dur / 2)))
}

// driftAllowance is the validity the coordinator subtracts (redlock's
// formula: TTL*factor + 2ms).
func (p Plan) driftAllowance() time.Duration {
	return time.Duration(float64(p.TTL)*p.Drift) + 2*time.Millisecond
}

// safeRate is the fastest master clock rate the drift allowance covers: a
// key set at the acquire's start expires after its time to live over the
// rate, TTL + d/(1-factor) with a lock delay d (redlock stretches the
// delay), which must not come before the validity's end plus the lock
// delay, TTL - drift + d.
func (p Plan) safeRate() float64 {
	life := float64(p.TTL)
	if p.Delay > 0 {
		life += math.Ceil(float64(p.Delay) / (1 - p.Drift))
	}
	return life / float64(p.TTL-p.driftAllowance()+p.Delay)
}

// Broken lists the documented assumptions the plan breaks (docs/safety.md):
// a forward clock jump on a master, a clock rate beyond the drift allowance,
// a restart without keys while the client has no quarantine. Client pauses
// past validity are found while running (see Result.Broken).
func (p Plan) Broken() []string {
	var out []string
	for _, f := range p.Faults {
		switch {
		case f.Kind == ClockJump:
			out = append(out, "forward clock jump on m"+fmt.Sprint(f.Master))
		case f.Kind == DriftBeyond:
			out = append(out, fmt.Sprintf("clock rate %.4f beyond allowance %.4f on m%d", f.Rate, p.safeRate(), f.Master))
		case (f.Kind == RestartEmpty || f.Kind == MasterCrash || f.Kind == CrashAOFTail || f.Kind == BootClockStep) && !p.Quar:
			out = append(out, "restart without keys and no quarantine on m"+fmt.Sprint(f.Master))
		}
	}
	return out
}

func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d family=%s masters=%d clients=%d workers=%d names=%d ttl=%v lockdelay=%v drift=%v maxinflight=%d fencing=%v quarantine=%v renew=%v lockretry=%v duration=%v net=%+v pause=%.2f cancel=%.2f",
		p.Seed, p.Family, p.Masters, p.Clients, p.Workers, len(p.Names), p.TTL, p.Delay, p.Drift, p.MaxIn, p.Fencing, p.Quar, p.Renew, p.LockRetry, p.Duration, p.Net, p.PauseP, p.CancelP)
	if p.DoPanicP > 0 {
		fmt.Fprintf(&b, " dopanic=%.2f", p.DoPanicP)
	}
	if p.Shapes != nil {
		fmt.Fprintf(&b, " shapes=%v owners=%v", p.Shapes, p.Owners)
	}
	if p.Fair {
		b.WriteString(" fair=true")
	}
	if p.Change != nil {
		b.WriteString("\n  " + p.Change.String())
	}
	for _, f := range p.Faults {
		b.WriteString("\n  " + f.String())
	}
	return b.String()
}
