// Regenerates vectors.txt with node (not needed by the tests):
//   node rng/testdata/gen.js > rng/testdata/vectors.txt
// Each line: "mulberry SEED N HASH" (the first N draws folded into a 64-bit hash)
// or "log XBITS LOGBITS" (bit patterns of x and of Math.log(x)).
function mulberry32(a) { return () => { a = (a + 0x6D2B79F5) | 0; let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) >>> 0; }; }
const f = new Float64Array(1), u = new BigUint64Array(f.buffer);
const bits = (x) => { f[0] = x; return u[0].toString(16).padStart(16, "0"); };
for (const seed of [0, 1, 5, 7, 9, 14, 42, 99, 2027, 4294967295]) {
  const r = mulberry32(seed); let h = 0n;
  for (let i = 0; i < 100000; i++) h = ((h * 1000003n) ^ BigInt(r())) & 0xffffffffffffffffn;
  console.log("mulberry " + seed + " 100000 " + h.toString(16));
}
const xs = [1, 2, 0.5, Math.SQRT2, Math.SQRT1_2, 1 + 2 ** -21, 1 - 2 ** -21, 1 + 2 ** -52, 1 - 2 ** -53,
  Number.MIN_VALUE, 2.2250738585072014e-308, 1e-300, 1e300, Number.MAX_VALUE, 10, 0.1, 1e-9, 4294967295 / 4294967296];
const r = mulberry32(3);
for (let i = 0; i < 400; i++) xs.push(1 - r() / 4294967296);
for (let i = 0; i < 100; i++) xs.push((r() + 1) * 2 ** ((r() % 200) - 100));
for (const x of xs) console.log("log " + bits(x) + " " + bits(Math.log(x)));
