#!/usr/bin/env python3
# Off-device check of moe.cu (run: python3 src/ops/cuda/moe/permutation_emulation.py).
# Emulates moe.cu's permutation (keys, stable sort, offsets_kernel, inverse_kernel, tile_table_kernel),
# the SIMT expert kernels' tile walk and indexing, and the combine (combine_vec_kernel and
# combine_scalar_kernel: ascending expert order per (token, head)), against a direct loop.
import random, math
random.seed(3)
def swiglu7(g, l):
    gc = min(g, 7.0); lc = min(max(l, -7.0), 7.0)
    return gc * (1/(1+math.exp(-1.702*gc))) * (lc + 1)

def run(T, H, E, K, D, De, kmajor, BM=4):
    W = H * D; G = H * E; S = T * H * K
    x = [random.uniform(-1, 1) for _ in range(T * W)]
    idx = []
    for th in range(T * H):
        idx += random.sample(range(E), K) if random.random() < 0.7 else random.sample(range(min(E, K + 1)), K)
    wts = [random.uniform(0.1, 1) for _ in range(S)]
    Wg = [[[random.uniform(-1, 1) for _ in range(De)] for _ in range(D)] for _ in range(G)]
    Wu = [[[random.uniform(-1, 1) for _ in range(De)] for _ in range(D)] for _ in range(G)]
    Wd = [[[random.uniform(-1, 1) for _ in range(D)] for _ in range(De)] for _ in range(G)]
    if kmajor:
        b_g = [Wg[g][k][n] for g in range(G) for n in range(De) for k in range(D)]
        b_u = [Wu[g][k][n] for g in range(G) for n in range(De) for k in range(D)]
        b_d = [Wd[g][k][n] for g in range(G) for n in range(D) for k in range(De)]
    else:
        b_g = [v for g in range(G) for row in Wg[g] for v in row]
        b_u = [v for g in range(G) for row in Wu[g] for v in row]
        b_d = [v for g in range(G) for row in Wd[g] for v in row]
    # keys_kernel
    keys = [((s // K) % H) * E + idx[s] for s in range(S)]
    vals = list(range(S))
    order = sorted(range(S), key=lambda i: keys[i])  # stable
    sk = [keys[i] for i in order]; sorted_slot = [vals[i] for i in order]
    offsets = [None] * (G + 1)
    for i in range(S):
        k = sk[i]; prev = sk[i - 1] if i else -1
        for g in range(prev + 1, k + 1): offsets[g] = i
        if i == S - 1:
            for g in range(k + 1, G + 1): offsets[g] = S
    pos = [0] * S
    for i in range(S): pos[sorted_slot[i]] = i
    # tile_table_kernel with 1024 "threads"
    per = (G + 1023) // 1024
    mine = []
    for t in range(1024):
        g0 = t * per; g1 = min(G, g0 + per)
        mine.append(sum((offsets[g + 1] - offsets[g] + BM - 1) // BM for g in range(g0, g1)))
    base = [sum(mine[:t]) for t in range(1024)]; total = sum(mine)
    tile_group = [None] * total; tile_row = [None] * total
    for t in range(1024):
        b = base[t]; g0 = t * per; g1 = min(G, g0 + per)
        for g in range(g0, g1):
            for r in range(offsets[g], offsets[g + 1], BM):
                tile_group[b] = g; tile_row[b] = r; b += 1
    # SIMT kernels (tile walk; the inner tiling of n/k is a plain loop here)
    hbuf = [0.0] * (S * De); rows = [0.0] * (S * D)
    def B(arr, g, k, n, Kd, N): return arr[(g * N + n) * Kd + k] if kmajor else arr[(g * Kd + k) * N + n]
    for tile in range(total):
        g = tile_group[tile]; r0 = tile_row[tile]; r1 = offsets[g + 1]
        for row in range(r0, min(r0 + BM, r1)):
            s = sorted_slot[row]; t = s // (H * K); h = (s // K) % H
            a = [x[t * W + h * D + k] for k in range(D)]
            for n in range(De):
                gg = sum(a[k] * B(b_g, g, k, n, D, De) for k in range(D))
                uu = sum(a[k] * B(b_u, g, k, n, D, De) for k in range(D))
                hbuf[row * De + n] = swiglu7(gg, uu)
    for tile in range(total):
        g = tile_group[tile]; r0 = tile_row[tile]; r1 = offsets[g + 1]
        for row in range(r0, min(r0 + BM, r1)):
            p = wts[sorted_slot[row]]
            for n in range(D):
                rows[row * D + n] = p * sum(hbuf[row * De + k] * B(b_d, g, k, n, De, D) for k in range(De))
    # combine_vec_kernel / combine_scalar_kernel
    out = [0.0] * (T * W)
    for i in range(T * H * D):
        th = i // D; d = i % D
        pairs = sorted((idx[th * K + k], pos[th * K + k]) for k in range(K))
        out[i] = sum(rows[p * D + d] for _, p in pairs)
    # direct reference
    err = 0.0
    for t in range(T):
        for h in range(H):
            acc = [0.0] * D
            for e in sorted(idx[(t * H + h) * K:(t * H + h + 1) * K]):
                k = idx[(t * H + h) * K:(t * H + h + 1) * K].index(e); p = wts[(t * H + h) * K + k]; g = h * E + e
                a = x[t * W + h * D:t * W + (h + 1) * D]
                hh = [swiglu7(sum(a[q] * Wg[g][q][n] for q in range(D)), sum(a[q] * Wu[g][q][n] for q in range(D))) for n in range(De)]
                for d in range(D): acc[d] += p * sum(hh[n] * Wd[g][n][d] for n in range(De))
            for d in range(D): err = max(err, abs(acc[d] - out[t * W + h * D + d]))
    empty = sum(offsets[g + 1] == offsets[g] for g in range(G))
    print(f"T{T} H{H} E{E} K{K} D{D} De{De} kmajor={kmajor}: tiles {total}, empty groups {empty}, max err {err:.2e}")
    return err < 1e-9

ok = all([run(4, 2, 12, 2, 3, 3, False), run(3, 3, 20, 4, 2, 2, True, BM=2), run(9, 2, 5, 2, 3, 4, False), run(13, 3, 6, 3, 4, 5, True), run(7, 1, 3, 3, 2, 3, False), run(20, 2, 8, 2, 3, 3, True, BM=3)])
print("EMULATION", "PASSED" if ok else "FAILED")
