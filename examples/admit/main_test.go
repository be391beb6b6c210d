package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/internal/maintest"
)

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-capacity", "0"},
		{"-work", "0s"},
		{"-load", "-1"},
		{"-duration", "2m"},
		{"-queue", "stack"},
		{"-max-wait", "0s"},
		{"-capacity", "10000", "-work", "1ms", "-load", "2"},
	} {
		if err := run(args, new(bytes.Buffer)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// The self-test runs end to end over loopback HTTP and accounts for every
// request it sent.
func TestSelftest(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-selftest", "-load", "1.5", "-duration", "400ms", "-capacity", "4", "-work", "10ms"}, &out); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^(critical|default|sheddable)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s`)
	rows := row.FindAllStringSubmatch(out.String(), -1)
	if len(rows) != 3 {
		t.Fatalf("want 3 class rows, got:\n%s", out.String())
	}
	total := 0
	for _, r := range rows {
		n := make([]int, 4)
		for i := range n {
			n[i], _ = strconv.Atoi(r[i+2])
		}
		if n[0] != n[1]+n[2]+n[3] {
			t.Errorf("%s: sent %d ≠ ok %d + refused %d + timed out %d", r[1], n[0], n[1], n[2], n[3])
		}
		total += n[0]
	}
	if total == 0 || !strings.Contains(out.String(), "learned limit") {
		t.Fatalf("nothing sent or no summary:\n%s", out.String())
	}
}

// -h prints the usage and exits 0 (it said "flag: help requested" and
// exited 1); a bad flag exits 1.
func TestFlagExits(t *testing.T) { maintest.CheckFlagExits(t, main, "admit") }
