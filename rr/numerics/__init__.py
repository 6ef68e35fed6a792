"""The arithmetic of the engine's kernels in numpy, rounded as the PTX rounds, a module per concept:

- `half`: f16 operations with one correct rounding, the PTX's min/max, f16 ↔ f32/f64 casts;
- `rounding`: `cvt`'s rounding to a float format and between floats and integers, f64 add and fma
  in any rounding mode;
- `fp8`: the e4m3 and e5m2 packs (`cvt.rn.satfinite.e4m3x2.f16x2`) and their values;
- `mufu`: the `.approx` f32 functions as the H200's MUFU computes them (tables measured on it,
  rr/data/mufu_h200.npz);
- `mma`: the e4m3 `mma` accumulation as a pluggable function, `mma_sync` the H200's tensor-core
  arithmetic.

The numpy model of the synthetic engine computes with these, and so does the CPU interpreter, so
the two agree byte for byte whenever they use the same `mma` model; the `.approx` functions and
`mma_sync` are bit-exact on the H200's probes (docs/numerics.md says how each rule was found).
Nothing is imported here: a stage imports the concepts it computes with (rr.fingerprint counts a
stage's code by its imports)."""
