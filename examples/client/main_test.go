package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/spillwayhq/spillway/internal/maintest"
)

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-down", "2s"},
		{"-duration", "0s"},
		{"-rate", "0"},
		{"-timeout", "-1s"},
	} {
		if err := run(args, new(bytes.Buffer)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// The comparison runs end to end over loopback HTTP: both clients make
// every call, and the resilient one never sends more than the budget
// allows beyond its calls.
func TestComparison(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-duration", "600ms", "-period", "300ms", "-down", "100ms", "-rate", "100"}, &out); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^(bare|spillway)\s+(\d+)\s+([\d.]+)%\s+(\d+)\s+(\d+) \(`)
	rows := row.FindAllStringSubmatch(out.String(), -1)
	if len(rows) != 2 {
		t.Fatalf("want 2 rows:\n%s", out.String())
	}
	for _, r := range rows {
		calls, _ := strconv.Atoi(r[2])
		hits, _ := strconv.Atoi(r[5])
		if calls == 0 {
			t.Fatalf("%s made no calls:\n%s", r[1], out.String())
		}
		// Budget: Ratio 0.2 of calls + Max 10 + a floor of 5/s; unsent
		// retries are free but never reach the backend.
		if r[1] == "spillway" && float64(hits) > 1.2*float64(calls)+10+5*1+1 {
			t.Errorf("spillway sent %d attempts for %d calls: above its budget", hits, calls)
		}
	}
}

// -h prints the usage and exits 0 (it said "flag: help requested" and
// exited 1); a bad flag exits 1.
func TestFlagExits(t *testing.T) { maintest.CheckFlagExits(t, main, "client") }
