package sim

import "github.com/spillwayhq/spillway/health"

var healthCheckTiming = Scenario{
	Name:    "health-check-timing",
	Ref:     "health_check_timing",
	Summary: "how long active and passive checks take to notice a dead server, and what it costs",
	Bind: func(f *Flags) Runner {
		qps := f.Float("qps", 5000, Positive, "total requests per second over all servers")
		servers := f.Int("servers", 10, Positive, 1e6, "servers sharing the traffic evenly")
		reqTimeout := f.Float("request-timeout", 1, Positive, "the balancer's own per-request timeout, seconds")
		lbNodes := f.Int("lb-nodes", 20, Positive, 1e6, "balancer nodes, each checking every server")
		fleet := f.Int("fleet", 500, Positive, 1e6, "servers each balancer node checks")
		return func() (*Report, error) {
			return runHealthCheckTiming(*qps, *servers, *reqTimeout, *lbNodes, *fleet), nil
		}
	},
}

// The three active settings the seed compares.
var healthSettings = []health.CheckTiming{
	{Interval: 2, Timeout: 1, Fall: 3, Rise: 2},
	{Interval: 5, Timeout: 2, Fall: 3, Rise: 2},
	{Interval: 1, Timeout: 0.5, Fall: 2, Rise: 3},
}

func runHealthCheckTiming(qps float64, servers int, reqTimeout float64, lbNodes, fleet int) *Report {
	r := &Report{}
	each := qps / float64(servers)
	r.Println("total " + Num(qps) + " QPS on " + Int(servers) + " servers = " + Num(each) + " QPS each")
	r.Println("active check setting              detect avg  worst | failed avg  worst | UP after")
	active := r.Table("active", "setting", "detect_avg_s", "detect_worst_s", "failed_avg", "failed_worst", "up_after_s")
	for _, c := range healthSettings {
		name := "inter " + Num(c.Interval) + "s, timeout " + Num(c.Timeout) + "s, fall " + Int(c.Fall) + ", rise " + Int(c.Rise)
		avg, worst, back := c.MeanDetection(), c.WorstDetection(), c.Recovery()
		r.Println(PadEnd(name, 39) + PadStart(Num(avg)+" s", 7) + PadStart(Num(worst)+" s", 8) + " |" +
			PadStart(Num(avg*each), 8) + PadStart(Num(worst*each), 7) + " |" + PadStart(Num(back)+" s", 6))
		active.Add(name, avg, worst, avg*each, worst*each, back)
	}
	passive := r.Table("passive", "errors_in_a_row", "fast_errors_ms", "fast_failed", "hung_s", "hung_failed")
	for _, k := range []int{5, 20} {
		p := health.PassiveTiming{Consecutive: k, RequestTimeout: reqTimeout}
		fast, hung := p.FastErrorDetection(each), p.HungDetection(each)
		hungFailed := JSRound(hung * each)
		r.Println("passive, " + PadStart(Int(k), 2) + " errors in a row: fast errors " + Num(fast*1000) + " ms (~" + Int(k) +
			" failed); hung server " + Num(hung) + " s (~" + Num(hungFailed) + " failed)")
		passive.Add(k, fast*1000, k, hung, hungFailed)
	}
	interval := healthSettings[0].Interval
	rate := health.CheckRate(lbNodes, fleet, interval)
	r.Println("check load: " + Int(lbNodes) + " LB nodes x " + Int(fleet) + " servers / " + Num(interval) + " s = " + Num(rate) + " checks/s")
	r.Table("check_load", "lb_nodes", "servers", "interval_s", "checks_per_s").Add(lbNodes, fleet, interval, rate)
	return r
}
