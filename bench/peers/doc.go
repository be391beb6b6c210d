// Package peers holds no code: this side module keeps Spillway's comparisons
// with its peers (benchmarks run in the same process, and cross-checks
// against implementations this project did not write) out of the main
// module's requirements. See README.md.
package peers
