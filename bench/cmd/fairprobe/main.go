package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/redis/go-redis/v9"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

type obs struct {
	redlock.NopObserver
	mu    sync.Mutex
	evs   []redlock.OpEvent
	node  []string
	t0    time.Time
	cur   []string
	saved [][]string
}

func (o *obs) OpStart(ctx context.Context, e redlock.OpEvent) context.Context {
	if e.Op == redlock.OpAcquire {
		o.mu.Lock()
		o.t0 = time.Now()
		o.cur = nil
		o.mu.Unlock()
	}
	return ctx
}

func (o *obs) NodeCall(ctx context.Context, e redlock.NodeEvent) {
	o.mu.Lock()
	o.cur = append(o.cur, fmt.Sprintf("%8.3fms %s m%d %v (took %v)", float64(time.Since(o.t0).Microseconds())/1000, e.Op, e.Index, e.Err, e.Took.Round(time.Microsecond)))
	o.mu.Unlock()
}

func (o *obs) OpDone(ctx context.Context, e redlock.OpEvent) {
	if e.Op == redlock.OpAcquire {
		o.mu.Lock()
		o.evs = append(o.evs, e)
		if e.Attempts >= 2 && len(o.saved) < 3 {
			o.saved = append(o.saved, append(o.cur, fmt.Sprintf("%8.3fms done attempts %d", float64(time.Since(o.t0).Microseconds())/1000, e.Attempts)))
		}
		o.mu.Unlock()
	}
}

func main() {
	fair := flag.Bool("fair", true, "")
	n := flag.Int("n", 5, "")
	clients := flag.Int("clients", 8, "")
	dur := flag.Duration("d", 3*time.Second, "")
	phases := flag.Int("phases", 4, "")
	gap := flag.Duration("gap", 2*time.Second, "")
	flag.Parse()
	var addrs []string
	for range *n {
		s, err := redisproc.Start(redisproc.Config{})
		if err != nil {
			panic(err)
		}
		defer s.Stop()
		addrs = append(addrs, s.Addr())
	}
	type acq struct {
		c              int
		want, got, rel time.Time
		attempts       int
	}
	var mu sync.Mutex
	var all []acq
	var wg sync.WaitGroup
	var obss []*obs
	t00 := time.Now().Add(500 * time.Millisecond)
	for i := range *clients {
		var nodes []redlock.Node
		for _, a := range addrs {
			nd, err := redisnode.Dial(a)
			if err != nil {
				panic(err)
			}
			nodes = append(nodes, nd)
		}
		o := &obs{}
		obss = append(obss, o)
		c, err := redlock.New(nodes, redlock.WithObserver(o))
		if err != nil {
			panic(err)
		}
		defer c.Close(context.Background())
		opts := []redlock.LockOption{redlock.WithTTL(10 * time.Second)}
		if *fair {
			opts = append(opts, redlock.WithFairQueue())
		}
		m, err := c.NewMutex("probe", opts...)
		if err != nil {
			panic(err)
		}
		wg.Go(func() {
			for ph := range *phases {
				pstart := t00.Add(time.Duration(ph) * (*dur + *gap))
				pstop := pstart.Add(*dur)
				time.Sleep(time.Until(pstart))
				want := time.Now()
				for time.Now().Before(pstop) {
					l, err := m.Lock(context.Background())
					got := time.Now()
					if err != nil {
						panic(err)
					}
					l.Unlock(context.Background())
					o.mu.Lock()
					at := o.evs[len(o.evs)-1].Attempts
					o.mu.Unlock()
					mu.Lock()
					all = append(all, acq{i, want, got, time.Now(), at})
					mu.Unlock()
					want = time.Now()
				}
			}
		})
	}
	wg.Wait()
	calls := map[string]int64{}
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		st, _ := rdb.Info(context.Background(), "commandstats").Result()
		for _, line := range strings.Split(st, "\r\n") {
			if strings.HasPrefix(line, "cmdstat_") {
				name := strings.TrimPrefix(line[:strings.Index(line, ":")], "cmdstat_")
				var c int64
				fmt.Sscanf(line[strings.Index(line, "calls=")+6:], "%d", &c)
				calls[name] += c
			}
		}
		rdb.Close()
	}
	defer func() {
		fmt.Println("calls per acquisition:", func() string {
			var b strings.Builder
			for k, v := range calls {
				if float64(v)/float64(len(all)) > 0.05 {
					fmt.Fprintf(&b, "%s=%.2f ", k, float64(v)/float64(len(all)))
				}
			}
			return b.String()
		}())
	}()
	slices.SortFunc(all, func(a, b acq) int { return a.got.Compare(b.got) })
	t0 := all[0].want
	period := (*dur) * time.Duration(*phases) / time.Duration(len(all))
	fmt.Printf("%d acquisitions, period %v\n", len(all), period)
	hist := map[int]int{}
	for _, a := range all {
		hist[a.attempts]++
	}
	fmt.Println("attempts histogram", hist)
	var ws []time.Duration
	for _, a := range all[len(all)/3:] {
		ws = append(ws, a.got.Sub(a.want))
	}
	slices.Sort(ws)
	fmt.Printf("waits after the first third: p50 %v p90 %v p99 %v max %v\n", ws[len(ws)/2], ws[len(ws)*9/10], ws[len(ws)*99/100], ws[len(ws)-1])
	for _, o := range obss[:3] {
		for _, sv := range o.saved[1:] {
			fmt.Println("----")
			for _, l := range sv {
				fmt.Println(l)
			}
		}
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return int(all[y].got.Sub(all[y].want) - all[x].got.Sub(all[x].want)) })
	for _, i := range idx[:15] {
		a := all[i]
		w := a.got.Sub(a.want)
		{
			fmt.Printf("#%d c%d waited %v (%.0f periods) attempts %d at %v\n", i, a.c, w, float64(w)/float64(period), a.attempts, a.want.Sub(t0).Round(time.Millisecond))
		}
	}
}
