;; The BF16 merge kernel in WebAssembly SIMD: 8 elements per step, every pass fused into one.
;; f32x4 arithmetic is IEEE single precision per lane, so each operation rounds exactly as the
;; scalar kernel in kernel.ts (and torch) does; the operations and their operand order mirror it.
;; Build: node tools/build-merge-wasm.mjs (writes kernel-simd.generated.ts next to this file).
(module
  (memory (export "memory") 1)

  ;; Merges n elements (n a multiple of 8) of BF16 tensors.
  ;;   $table: k + 2 pointers (i32): expert 0..k-1, then the base, then the output
  ;;   $tv: task vectors (sum of x - base, scaled by $lam if $scale, plus base); else the average
  ;;        (sum of x, divided by $divisor if $divide)
  ;;   $sq: k f64x2 running sums of the squared deltas per expert
  ;;   $dots: k(k-1)/2 f64x2 running sums of the task vectors' dot products (with a base)
  ;;   $tail: f64x2 running sum of (merged - base)^2, then i32x4 count of non-finite merged values
  ;;   $scratch: 64 bytes per expert, each expert's delta of the current step promoted to f64
  (func (export "merge")
    (param $table i32) (param $k i32) (param $withBase i32) (param $tv i32)
    (param $lam f32) (param $scale i32) (param $divisor f32) (param $divide i32)
    (param $n i32) (param $sq i32) (param $dots i32) (param $tail i32) (param $scratch i32)
    (local $o i32) (local $end i32) (local $e i32) (local $j i32) (local $p i32)
    (local $basePtr i32) (local $outPtr i32) (local $s i32) (local $t i32) (local $dp i32)
    (local $v v128) (local $blo v128) (local $bhi v128) (local $xlo v128) (local $xhi v128)
    (local $dlo v128) (local $dhi v128) (local $alo v128) (local $ahi v128)
    (local $mlo v128) (local $mhi v128)
    (local $m0 v128) (local $m1 v128) (local $m2 v128) (local $m3 v128)
    (local $b0 v128) (local $b1 v128) (local $b2 v128) (local $b3 v128)
    (local $q v128) (local $d v128) (local $nf v128) (local $msq v128)
    (local $lamv v128) (local $divv v128)
    (local.set $basePtr (i32.load (i32.add (local.get $table) (i32.shl (local.get $k) (i32.const 2)))))
    (local.set $outPtr (i32.load offset=4 (i32.add (local.get $table) (i32.shl (local.get $k) (i32.const 2)))))
    (local.set $end (i32.shl (local.get $n) (i32.const 1)))
    (local.set $lamv (f32x4.splat (local.get $lam)))
    (local.set $divv (f32x4.splat (local.get $divisor)))
    (local.set $msq (v128.load (local.get $tail)))
    (local.set $nf (v128.load offset=16 (local.get $tail)))
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))
        ;; BF16 -> F32 is the 16 bits placed high.
        (if (local.get $withBase) (then
          (local.set $v (v128.load (i32.add (local.get $basePtr) (local.get $o))))
          (local.set $blo (i32x4.shl (i32x4.extend_low_i16x8_u (local.get $v)) (i32.const 16)))
          (local.set $bhi (i32x4.shl (i32x4.extend_high_i16x8_u (local.get $v)) (i32.const 16)))))
        ;; The sum: a left fold from expert 0, in request order.
        (local.set $e (i32.const 0))
        (loop $experts
          (local.set $v (v128.load (i32.add
            (i32.load (i32.add (local.get $table) (i32.shl (local.get $e) (i32.const 2))))
            (local.get $o))))
          (local.set $xlo (i32x4.shl (i32x4.extend_low_i16x8_u (local.get $v)) (i32.const 16)))
          (local.set $xhi (i32x4.shl (i32x4.extend_high_i16x8_u (local.get $v)) (i32.const 16)))
          ;; The delta the diagnostics describe: the task vector with a base, the value without.
          (local.set $dlo (local.get $xlo))
          (local.set $dhi (local.get $xhi))
          (if (local.get $withBase) (then
            (local.set $dlo (f32x4.sub (local.get $xlo) (local.get $blo)))
            (local.set $dhi (f32x4.sub (local.get $xhi) (local.get $bhi)))))
          (if (local.get $tv) (then
            (local.set $xlo (local.get $dlo))
            (local.set $xhi (local.get $dhi))))
          (if (i32.eqz (local.get $e))
            (then
              (local.set $alo (local.get $xlo))
              (local.set $ahi (local.get $xhi)))
            (else
              (local.set $alo (f32x4.add (local.get $alo) (local.get $xlo)))
              (local.set $ahi (f32x4.add (local.get $ahi) (local.get $xhi)))))
          (local.set $s (i32.add (local.get $scratch) (i32.shl (local.get $e) (i32.const 6))))
          (v128.store offset=0 (local.get $s) (f64x2.promote_low_f32x4 (local.get $dlo)))
          (v128.store offset=16 (local.get $s) (f64x2.promote_low_f32x4
            (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $dlo) (local.get $dlo))))
          (v128.store offset=32 (local.get $s) (f64x2.promote_low_f32x4 (local.get $dhi)))
          (v128.store offset=48 (local.get $s) (f64x2.promote_low_f32x4
            (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $dhi) (local.get $dhi))))
          (local.set $e (i32.add (local.get $e) (i32.const 1)))
          (br_if $experts (i32.lt_u (local.get $e) (local.get $k))))
        (if (local.get $tv)
          (then
            (if (local.get $scale) (then
              (local.set $alo (f32x4.mul (local.get $lamv) (local.get $alo)))
              (local.set $ahi (f32x4.mul (local.get $lamv) (local.get $ahi)))))
            (local.set $alo (f32x4.add (local.get $blo) (local.get $alo)))
            (local.set $ahi (f32x4.add (local.get $bhi) (local.get $ahi))))
          (else
            (if (local.get $divide) (then
              (local.set $alo (f32x4.div (local.get $alo) (local.get $divv)))
              (local.set $ahi (f32x4.div (local.get $ahi) (local.get $divv)))))))
        ;; F32 -> BF16, round to nearest even; a NaN keeps its sign and high payload and is made quiet.
        (local.set $alo (v128.bitselect
          (v128.or (i32x4.shr_u (local.get $alo) (i32.const 16)) (v128.const i32x4 0x40 0x40 0x40 0x40))
          (i32x4.shr_u
            (i32x4.add
              (i32x4.add (local.get $alo) (v128.const i32x4 0x7fff 0x7fff 0x7fff 0x7fff))
              (v128.and (i32x4.shr_u (local.get $alo) (i32.const 16)) (v128.const i32x4 1 1 1 1)))
            (i32.const 16))
          (i32x4.gt_u
            (v128.and (local.get $alo) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff))
            (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))))
        (local.set $ahi (v128.bitselect
          (v128.or (i32x4.shr_u (local.get $ahi) (i32.const 16)) (v128.const i32x4 0x40 0x40 0x40 0x40))
          (i32x4.shr_u
            (i32x4.add
              (i32x4.add (local.get $ahi) (v128.const i32x4 0x7fff 0x7fff 0x7fff 0x7fff))
              (v128.and (i32x4.shr_u (local.get $ahi) (i32.const 16)) (v128.const i32x4 1 1 1 1)))
            (i32.const 16))
          (i32x4.gt_u
            (v128.and (local.get $ahi) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff))
            (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))))
        (local.set $v (i16x8.narrow_i32x4_u (local.get $alo) (local.get $ahi)))
        (v128.store (i32.add (local.get $outPtr) (local.get $o)) (local.get $v))
        ;; The diagnostics describe the values as written.
        (local.set $mlo (i32x4.shl (i32x4.extend_low_i16x8_u (local.get $v)) (i32.const 16)))
        (local.set $mhi (i32x4.shl (i32x4.extend_high_i16x8_u (local.get $v)) (i32.const 16)))
        (local.set $nf (i32x4.sub (local.get $nf) (i32x4.eq
          (v128.and (local.get $mlo) (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
          (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))))
        (local.set $nf (i32x4.sub (local.get $nf) (i32x4.eq
          (v128.and (local.get $mhi) (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
          (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))))
        (local.set $m0 (f64x2.promote_low_f32x4 (local.get $mlo)))
        (local.set $m1 (f64x2.promote_low_f32x4
          (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $mlo) (local.get $mlo))))
        (local.set $m2 (f64x2.promote_low_f32x4 (local.get $mhi)))
        (local.set $m3 (f64x2.promote_low_f32x4
          (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $mhi) (local.get $mhi))))
        (if (local.get $withBase)
          (then
            (local.set $b0 (f64x2.promote_low_f32x4 (local.get $blo)))
            (local.set $b1 (f64x2.promote_low_f32x4
              (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $blo) (local.get $blo))))
            (local.set $b2 (f64x2.promote_low_f32x4 (local.get $bhi)))
            (local.set $b3 (f64x2.promote_low_f32x4
              (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $bhi) (local.get $bhi))))
            (local.set $d (f64x2.sub (local.get $m0) (local.get $b0)))
            (local.set $msq (f64x2.add (local.get $msq) (f64x2.mul (local.get $d) (local.get $d))))
            (local.set $d (f64x2.sub (local.get $m1) (local.get $b1)))
            (local.set $msq (f64x2.add (local.get $msq) (f64x2.mul (local.get $d) (local.get $d))))
            (local.set $d (f64x2.sub (local.get $m2) (local.get $b2)))
            (local.set $msq (f64x2.add (local.get $msq) (f64x2.mul (local.get $d) (local.get $d))))
            (local.set $d (f64x2.sub (local.get $m3) (local.get $b3)))
            (local.set $msq (f64x2.add (local.get $msq) (f64x2.mul (local.get $d) (local.get $d))))
            ;; Σ τ² per expert and Σ τᵢ·τⱼ per pair, from the promoted task vectors.
            (local.set $e (i32.const 0))
            (local.set $p (i32.const 0))
            (loop $norms
              (local.set $s (i32.add (local.get $scratch) (i32.shl (local.get $e) (i32.const 6))))
              (local.set $t (i32.add (local.get $sq) (i32.shl (local.get $e) (i32.const 4))))
              (local.set $q (v128.load (local.get $t)))
              (local.set $q (f64x2.add (local.get $q)
                (f64x2.mul (v128.load offset=0 (local.get $s)) (v128.load offset=0 (local.get $s)))))
              (local.set $q (f64x2.add (local.get $q)
                (f64x2.mul (v128.load offset=16 (local.get $s)) (v128.load offset=16 (local.get $s)))))
              (local.set $q (f64x2.add (local.get $q)
                (f64x2.mul (v128.load offset=32 (local.get $s)) (v128.load offset=32 (local.get $s)))))
              (local.set $q (f64x2.add (local.get $q)
                (f64x2.mul (v128.load offset=48 (local.get $s)) (v128.load offset=48 (local.get $s)))))
              (v128.store (local.get $t) (local.get $q))
              (local.set $j (i32.add (local.get $e) (i32.const 1)))
              (block $pairsDone
                (loop $pairs
                  (br_if $pairsDone (i32.ge_u (local.get $j) (local.get $k)))
                  (local.set $t (i32.add (local.get $scratch) (i32.shl (local.get $j) (i32.const 6))))
                  (local.set $dp (i32.add (local.get $dots) (i32.shl (local.get $p) (i32.const 4))))
                  (local.set $q (v128.load (local.get $dp)))
                  (local.set $q (f64x2.add (local.get $q)
                    (f64x2.mul (v128.load offset=0 (local.get $s)) (v128.load offset=0 (local.get $t)))))
                  (local.set $q (f64x2.add (local.get $q)
                    (f64x2.mul (v128.load offset=16 (local.get $s)) (v128.load offset=16 (local.get $t)))))
                  (local.set $q (f64x2.add (local.get $q)
                    (f64x2.mul (v128.load offset=32 (local.get $s)) (v128.load offset=32 (local.get $t)))))
                  (local.set $q (f64x2.add (local.get $q)
                    (f64x2.mul (v128.load offset=48 (local.get $s)) (v128.load offset=48 (local.get $t)))))
                  (v128.store (local.get $dp) (local.get $q))
                  (local.set $p (i32.add (local.get $p) (i32.const 1)))
                  (local.set $j (i32.add (local.get $j) (i32.const 1)))
                  (br $pairs)))
              (local.set $e (i32.add (local.get $e) (i32.const 1)))
              (br_if $norms (i32.lt_u (local.get $e) (local.get $k)))))
          (else
            ;; Without a base: Σ (x - merged)² per expert.
            (local.set $e (i32.const 0))
            (loop $deviations
              (local.set $s (i32.add (local.get $scratch) (i32.shl (local.get $e) (i32.const 6))))
              (local.set $t (i32.add (local.get $sq) (i32.shl (local.get $e) (i32.const 4))))
              (local.set $q (v128.load (local.get $t)))
              (local.set $d (f64x2.sub (v128.load offset=0 (local.get $s)) (local.get $m0)))
              (local.set $q (f64x2.add (local.get $q) (f64x2.mul (local.get $d) (local.get $d))))
              (local.set $d (f64x2.sub (v128.load offset=16 (local.get $s)) (local.get $m1)))
              (local.set $q (f64x2.add (local.get $q) (f64x2.mul (local.get $d) (local.get $d))))
              (local.set $d (f64x2.sub (v128.load offset=32 (local.get $s)) (local.get $m2)))
              (local.set $q (f64x2.add (local.get $q) (f64x2.mul (local.get $d) (local.get $d))))
              (local.set $d (f64x2.sub (v128.load offset=48 (local.get $s)) (local.get $m3)))
              (local.set $q (f64x2.add (local.get $q) (f64x2.mul (local.get $d) (local.get $d))))
              (v128.store (local.get $t) (local.get $q))
              (local.set $e (i32.add (local.get $e) (i32.const 1)))
              (br_if $deviations (i32.lt_u (local.get $e) (local.get $k))))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $step)))
    (v128.store (local.get $tail) (local.get $msq))
    (v128.store offset=16 (local.get $tail) (local.get $nf)))
)
