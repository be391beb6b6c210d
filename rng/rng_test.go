package rng

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestVectors checks the generator and the logarithm against bit patterns
// produced by node (testdata/gen.js).
func TestVectors(t *testing.T) {
	f, err := os.Open("testdata/vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var draws, logs int
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch fields[0] {
		case "mulberry":
			seed, _ := strconv.ParseUint(fields[1], 10, 32)
			n, _ := strconv.Atoi(fields[2])
			want, _ := strconv.ParseUint(fields[3], 16, 64)
			m := New(uint32(seed))
			var h uint64
			for i := 0; i < n; i++ {
				h = h*1000003 ^ uint64(m.Uint32())
			}
			if h != want {
				t.Errorf("mulberry32(%d): hash of %d draws = %x, want %x", seed, n, h, want)
			}
			draws++
		case "log":
			xb, _ := strconv.ParseUint(fields[1], 16, 64)
			want, _ := strconv.ParseUint(fields[2], 16, 64)
			x := math.Float64frombits(xb)
			if got := math.Float64bits(Log(x)); got != want {
				t.Errorf("Log(%v) = %x, want %x", x, got, want)
			}
			logs++
		}
	}
	if draws == 0 || logs == 0 {
		t.Fatalf("vectors file holds %d generator and %d log vectors", draws, logs)
	}
}

func TestLogSpecialCases(t *testing.T) {
	if !math.IsInf(Log(0), -1) || !math.IsNaN(Log(-1)) || !math.IsInf(Log(math.Inf(1)), 1) || !math.IsNaN(Log(math.NaN())) {
		t.Fatal("special cases wrong")
	}
}

func TestFloat64Range(t *testing.T) {
	m := New(42)
	for i := 0; i < 100000; i++ {
		if x := m.Float64(); x < 0 || x >= 1 {
			t.Fatalf("draw %d = %v outside [0,1)", i, x)
		}
	}
}

func BenchmarkExp(b *testing.B) {
	m := New(1)
	b.ReportAllocs()
	var s float64
	for i := 0; i < b.N; i++ {
		s += m.Exp(1)
	}
	_ = s
}
