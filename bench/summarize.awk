# SPDX-License-Identifier: BSD-3-Clause
# Summary of bench/vs-mpi.sh's raw.csv (awk -F, -f summarize.awk raw.csv).
# Variables: peers ("ompi mpich"), summary (CSV to write), plotdir (gnuplot data).
#
# Per rank count, collective and size: the median time of each side over the
# rounds, and per peer the ratio peer time / mlcomm time taken round by round
# (both ran in the same round) and then the median of those: > 1 means
# mlcomm is faster; mlcomm's p50 and p99 (every call timed alone, the
# slowest rank's, median over rounds) and each peer's p99. Then the targets
# (docs/PERFORMANCE.md), checked against Open MPI (ompi) when it ran, else
# against the first peer.

function median(a, n,    i, j, v, b) {
    if (n == 0) return ""
    for (i = 1; i <= n; i++) b[i] = a[i]
    for (i = 2; i <= n; i++) { v = b[i]; for (j = i - 1; j >= 1 && b[j] > v; j--) b[j + 1] = b[j]; b[j + 1] = v }
    return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
}

function human(n,    u, k) {
    split("B KiB MiB GiB", u, " ")
    k = 1
    while (n >= 1024 && k < 4 && n % 1024 == 0) { n /= 1024; k++ }
    return n " " u[k]
}

# Ratios: two decimals, or two significant digits below 0.1 (never a bare 0.00).
function fmt_ratio(q) {
    if (q == "") return "-"
    return q >= 0.1 ? sprintf("%.2f", q) : sprintf("%.2g", q)
}

function fmt_us(t) { return t == "" ? "-" : sprintf("%.2f", t) }

# mlcomm's algbw at sizes >= lo of allreduce, as a fraction of the memcpy bound: each >= min.
function target_bound(np, lo, min, title,    i, s, fr, worst, cells, ok) {
    worst = ""; cells = ""
    for (i = 1; i <= nsizes[np, "allreduce"]; i++) {
        s = sizes[np, "allreduce", i]
        if (s < lo) continue
        fr = frac_of(np, "allreduce", s)
        if (fr == "") continue
        if (worst == "" || fr < worst) worst = fr
        cells = cells " " sprintf("%.2f", fr)
    }
    ok = worst != "" && worst >= min
    printf "  %-38s cells%s (each >= %.2f)  %s\n", title, worst == "" ? " none" : cells, min, ok ? "PASS" : "FAIL"
    npass += ok; ntargets++
}

# mlcomm's time at size 0 (median over rounds): <= max_us.
function target_zero(np, coll, max_us, title,    t, ok) {
    t = med_of(T, np, coll, 0, "mlcomm")
    ok = t != "" && t <= max_us
    printf "  %-38s %s us (<= %.2f)  %s\n", title, t == "" ? "-" : sprintf("%.3f", t), max_us, ok ? "PASS" : "FAIL"
    npass += ok; ntargets++
}

# mlcomm's p99 at size s within k times its p50.
function target_tail(np, coll, s, k, title,    a, b, ok) {
    a = med_of(P50, np, coll, s, "mlcomm"); b = med_of(P99, np, coll, s, "mlcomm")
    ok = a != "" && b != "" && b <= k * a
    printf "  %-38s p50 %s us, p99 %s us (p99 <= %.0fx p50)  %s\n", title, fmt_us(a), fmt_us(b), k, ok ? "PASS" : "FAIL"
    npass += ok; ntargets++
}

function factor(coll, p) {
    if (coll == "allreduce") return 2 * (p - 1) / p
    if (coll == "allgather" || coll == "reduce_scatter") return (p - 1) / p
    return 1
}

# Median over rounds of field F (time/algbw/busbw) of side at (np, coll, size).
function med_of(arr, np, coll, size, side,    r, v, n) {
    n = 0
    for (r = 1; r <= maxround[np]; r++)
        if ((np, coll, size, side, r) in arr) v[++n] = arr[np, coll, size, side, r]
    return median(v, n)
}

# Median over rounds of peer time / mlcomm time.
function ratio_of(np, coll, size, peer,    r, v, n) {
    n = 0
    for (r = 1; r <= maxround[np]; r++)
        if ((np, coll, size, peer, r) in T && (np, coll, size, "mlcomm", r) in T && T[np, coll, size, "mlcomm", r] > 0)
            v[++n] = T[np, coll, size, peer, r] / T[np, coll, size, "mlcomm", r]
    return median(v, n)
}

# Median over rounds of mlcomm algbw / memcpy bandwidth at the same size.
function frac_of(np, coll, size,    r, v, n) {
    n = 0
    for (r = 1; r <= maxround[np]; r++)
        if ((np, coll, size, "mlcomm", r) in A && (np, size, r) in MEM && MEM[np, size, r] > 0)
            v[++n] = A[np, coll, size, "mlcomm", r] / MEM[np, size, r]
    return median(v, n)
}

function memcpy_of(np, size,    r, v, n) {
    n = 0
    for (r = 1; r <= maxround[np]; r++) if ((np, size, r) in MEM) v[++n] = MEM[np, size, r]
    return median(v, n)
}

function add_unique(list, n, x,    i) {
    for (i = 1; i <= n; i++) if (list[i] == x) return n
    list[++n] = x
    return n
}

# Check one target: cells of coll at sizes in [lo, hi] against peer.
# Every cell >= cellmin and the geometric mean >= gmin (gmin 0: cells only).
function target(np, peer, coll, lo, hi, gmin, cellmin, title,    i, s, q, n, sum, worst, cells, ok, g, verdict) {
    n = 0; sum = 0; worst = ""; cells = ""
    for (i = 1; i <= nsizes[np, coll]; i++) {
        s = sizes[np, coll, i]
        if (s < lo || s > hi || s == 0) continue
        q = ratio_of(np, coll, s, peer)
        if (q == "") continue
        n++; sum += log(q)
        if (worst == "" || q < worst) worst = q
        cells = cells " " fmt_ratio(q)
    }
    if (n == 0) { printf "  %-38s not measured in this run\n", title; return }
    g = exp(sum / n)
    ok = worst >= cellmin && (gmin == 0 || g >= gmin)
    verdict = ok ? "PASS" : "FAIL"
    if (gmin > 0)
        printf "  %-38s geomean %5s (>= %.2f), worst cell %5s (>= %.3f)  %s\n", title, fmt_ratio(g), gmin, fmt_ratio(worst), cellmin, verdict
    else
        printf "  %-38s cells%s (each >= %.2f)  %s\n", title, cells, cellmin, verdict
    npass += ok; ntargets++
}

NR == 1 { next } # header
$3 == "memcpy" {
    MEM[$1, $5, $2] = $7 > 0 ? $5 / ($7 * 1e3) : 0
    if ($2 > maxround[$1]) maxround[$1] = $2
    next
}
$2 > 0 {
    np = $1; r = $2; side = $3; coll = $4; size = $5 + 0
    # bandwidths from size and time (the tools print them rounded)
    T[np, coll, size, side, r] = $7
    if (NF >= 12 && $11 != "-") { P50[np, coll, size, side, r] = $11; P99[np, coll, size, side, r] = $12 }
    A[np, coll, size, side, r] = $7 > 0 ? size / ($7 * 1e3) : 0
    B[np, coll, size, side, r] = A[np, coll, size, side, r] * factor(coll, np)
    if (side == "mlcomm") ALGO[np, coll, size] = $10
    if (r > maxround[np]) maxround[np] = r
    nnp = add_unique(nps, nnp, np)
    ncoll = add_unique(colls, ncoll, coll)
    if (!((np, coll, size) in have)) {
        have[np, coll, size] = 1
        k = ++nsizes[np, coll]
        # keep sizes sorted
        for (j = k; j > 1 && sizes[np, coll, j - 1] > size; j--) sizes[np, coll, j] = sizes[np, coll, j - 1]
        sizes[np, coll, j] = size
    }
}
END {
    npeers = split(peers, P, " ")
    head = "np,coll,size,mlcomm_algo,rounds,mlcomm_us,mlcomm_busbw"
    for (k = 1; k <= npeers; k++) head = head "," P[k] "_us," P[k] "_busbw," P[k] "_ratio"
    head = head ",memcpy_gbps,mlcomm_algbw_over_memcpy"
    print head > summary
    for (a = 1; a <= nnp; a++) {
        np = nps[a]
        printf "\n## %d ranks (%d rounds; time: median us; ratio: peer time / mlcomm time, median over rounds, > 1 = mlcomm faster)\n", np, maxround[np]
        for (c = 1; c <= ncoll; c++) {
            coll = colls[c]
            if (!nsizes[np, coll]) continue
            printf "\n### %s, %d ranks\n\n", coll, np
            line = sprintf("| %9s | %-12s | %10s | %7s | %7s |", "size", "mlcomm algo", "mlcomm us", "p50", "p99")
            sep = "|----------:|:-------------|-----------:|--------:|--------:|"
            for (k = 1; k <= npeers; k++) {
                line = line sprintf(" %10s | %7s | %6s |", P[k] " us", "p99", "ratio")
                sep = sep "-----------:|--------:|-------:|"
            }
            if (coll == "allreduce") { line = line " of memcpy |"; sep = sep "----------:|" }
            print line; print sep
            dat = plotdir "/plot." np "." coll ".dat"
            print "# size mlcomm_busbw " peers " memcpy_busbw" > dat
            for (i = 1; i <= nsizes[np, coll]; i++) {
                s = sizes[np, coll, i]
                tm = med_of(T, np, coll, s, "mlcomm")
                row = sprintf("| %9s | %-12s | %10s | %7s | %7s |", human(s), ALGO[np, coll, s], tm == "" ? "-" : sprintf("%.2f", tm),
                              fmt_us(med_of(P50, np, coll, s, "mlcomm")), fmt_us(med_of(P99, np, coll, s, "mlcomm")))
                csv = np "," coll "," s "," ALGO[np, coll, s] "," maxround[np] "," tm "," med_of(B, np, coll, s, "mlcomm")
                plot = s " " (tm == "" ? "NaN" : med_of(B, np, coll, s, "mlcomm"))
                for (k = 1; k <= npeers; k++) {
                    tp = med_of(T, np, coll, s, P[k])
                    q = ratio_of(np, coll, s, P[k])
                    row = row sprintf(" %10s | %7s | %6s |", tp == "" ? "-" : sprintf("%.2f", tp),
                                      fmt_us(med_of(P99, np, coll, s, P[k])), fmt_ratio(q))
                    bp = med_of(B, np, coll, s, P[k])
                    csv = csv "," tp "," bp "," q
                    plot = plot " " (bp == "" ? "NaN" : bp)
                }
                mc = memcpy_of(np, s)
                fr = frac_of(np, coll, s)
                if (coll == "allreduce") row = row sprintf(" %9s |", fr == "" ? "-" : sprintf("%.2f", fr))
                csv = csv "," mc "," fr
                plot = plot " " ((mc == "" || coll != "allreduce") ? "NaN" : mc * factor(coll, np))
                print row
                print csv > summary
                print plot > dat
            }
            close(dat)
        }
    }
    # The performance targets (docs/PERFORMANCE.md), per rank count, against
    # Open MPI (or the first peer); 8 ranks and MPICH: information only.
    ref = P[1]
    for (k = 1; k <= npeers; k++) if (P[k] == "ompi") ref = "ompi"
    for (a = 1; a <= nnp; a++) {
        np = nps[a]
        if (np != 2 && np != 4) continue
        printf "\n## targets, %d ranks, against %s (ratio = peer time / mlcomm time)\n", np, ref
        if (np == 2) {
            target(np, ref, "allreduce", 1, 128, 0, 1.0, "allreduce 8..128 B: >= 1.0")
            target(np, ref, "broadcast", 1, 128, 0, 1.0, "broadcast 8..128 B: >= 1.0")
            target(np, ref, "allreduce", 512 * 1024, 8 * 1048576, 0, 1.25, "allreduce 512 KiB..8 MiB: >= 1.25")
            target(np, ref, "allreduce", 32 * 1048576, 1e18, 0, 3.0, "allreduce >= 32 MiB: >= 3.0")
            target_bound(np, 32 * 1048576, 0.75, "allreduce >= 32 MiB: of memcpy bound")
            target(np, ref, "allgather", 2 * 1048576, 1e18, 0, 1.1, "allgather >= 2 MiB: >= 1.1")
            target(np, ref, "broadcast", 8 * 1048576, 1e18, 0, 1.1, "broadcast >= 8 MiB: >= 1.1")
            target_tail(np, "allreduce", 8, 3, "allreduce 8 B: tail")
            target_tail(np, "broadcast", 8, 3, "broadcast 8 B: tail")
        } else {
            target(np, ref, "broadcast", 1, 128, 0, 1.0, "broadcast 8..128 B: >= 1.0")
            target(np, ref, "allreduce", 32 * 1024, 128 * 1024, 0, 1.0, "allreduce 32..128 KiB: >= 1.0")
            target_zero(np, "allgather", 0.05, "allgather 0 B: returns locally")
            target_zero(np, "reduce_scatter", 0.05, "reduce_scatter 0 B: returns locally")
            target(np, ref, "allreduce", 32 * 1048576, 1e18, 0, 3.0, "allreduce >= 32 MiB: >= 3.0")
            target_bound(np, 32 * 1048576, 0.5, "allreduce >= 32 MiB: of memcpy bound")
        }
        target(np, ref, "reduce_scatter", 512 * 1024, 1e18, 0, 1.0, "reduce_scatter >= 512 KiB: ahead")
    }
    for (a = 1; a <= nnp; a++) {
        np = nps[a]
        for (i = 1; i <= nsizes[np, "allreduce"]; i++) {
            s = sizes[np, "allreduce", i]
            if (s < 32 * 1048576) continue
            fr = frac_of(np, "allreduce", s)
            if (fr != "")
                printf "  allreduce %s, %d ranks: mlcomm algbw = %.2f of the memcpy bound (%.2f GB/s per rank copying at once)\n", human(s), np, fr, memcpy_of(np, s)
        }
    }
    printf "\n%d of %d target checks pass\n", npass, ntargets
    close(summary)
}
