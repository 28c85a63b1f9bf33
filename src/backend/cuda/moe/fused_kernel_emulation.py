#!/usr/bin/env python3
# Off-device check of moe_fused_sm90.cu (run: python3 src/backend/cuda/moe/fused_kernel_emulation.py).
# Emulates moe_fused_sm90.cu's address math for one tile (D=64 or 128, De=128, K-major or not) with
# wmma semantics written out: checks the shared-memory layouts, fragment offsets and loaders against a
# direct computation. (Not the cp.async / barrier timing: that needs the GPU.)
import random, math
random.seed(1)
def swiglu7(g, l):
    gc = min(g, 7.0); lc = min(max(l, -7.0), 7.0)
    return gc * (1/(1+math.exp(-1.702*gc))) * (lc + 1)

def run(D, De, KMajor, nrows):
    kBM, kNC, kKC, kPad = 64, 64, 64, 8
    kLdA = D + kPad; kLdB = kNC + kPad; kLdS = kNC + 4; kLdWdRow = D + kPad; kLdWdCol = kNC + kPad; kLdY = D + 4
    X = [[random.uniform(-1,1) for _ in range(D)] for _ in range(nrows)]
    Wg = [[random.uniform(-1,1) for _ in range(De)] for _ in range(D)]   # [in, out]
    Wu = [[random.uniform(-1,1) for _ in range(De)] for _ in range(D)]
    Wd = [[random.uniform(-1,1) for _ in range(D)] for _ in range(De)]
    # global flat arrays in the kernel's layouts
    if KMajor:
        wg = [Wg[k][n] for n in range(De) for k in range(D)]; wu = [Wu[k][n] for n in range(De) for k in range(D)]
        wd = [Wd[k][n] for n in range(D) for k in range(De)]
    else:
        wg = [Wg[k][n] for k in range(D) for n in range(De)]; wu = [Wu[k][n] for k in range(D) for n in range(De)]
        wd = [Wd[k][n] for k in range(De) for n in range(D)]
    As = [0.0] * (kBM * kLdA)
    for i in range(kBM * (D // 8)):
        r = i // (D // 8); c = (i % (D // 8)) * 8
        for e in range(8): As[r * kLdA + c + e] = X[r][c + e] if r < nrows else 0.0
    Bs = [[0.0] * (2 * kKC * kLdB) for _ in range(2)]
    def load_gu(n0, k0, st):
        for i in range(2 * 64 * 8):
            m = i // (64 * 8); j = i % (64 * 8); r = j // 8; c = (j % 8) * 8
            src = wu if m else wg
            off = (n0 + r) * D + k0 + c if KMajor else (k0 + r) * De + n0 + c
            base = kKC * kLdB if m else 0
            for e in range(8): Bs[st][base + r * kLdB + c + e] = src[off + e]
    Wds = [0.0] * max(kNC * kLdWdRow, D * kLdWdCol)
    def load_wd(n0):
        if KMajor:
            for i in range(D * 8):
                r = i // 8; c = (i % 8) * 8
                for e in range(8): Wds[r * kLdWdCol + c + e] = wd[r * De + n0 + c + e]
        else:
            for i in range(kNC * (D // 8)):
                r = i // (D // 8); c = (i % (D // 8)) * 8
                for e in range(8): Wds[r * kLdWdRow + c + e] = wd[(n0 + r) * D + c + e]
    def lda(mem, p, ld): return [[mem[p + i * ld + k] for k in range(16)] for i in range(16)]
    def ldb(mem, p, ld, col): return [[mem[p + n * ld + k] if col else mem[p + k * ld + n] for n in range(16)] for k in range(16)]
    def mma(C, A, B):
        for i in range(16):
            for j in range(16): C[i][j] += sum(A[i][k] * B[k][j] for k in range(16))
    kYF = D // 64
    y = {w: [[[[0.0] * 16 for _ in range(16)] for _ in range(kYF)] for _ in range(2)] for w in range(8)}
    Ss = [0.0] * (kBM * kLdS); Hs = [0.0] * (kBM * (kNC + kPad))
    for n0 in range(0, De, kNC):
        load_wd(n0)
        gf = {w: [[[0.0] * 16 for _ in range(16)] for _ in range(2)] for w in range(8)}
        uf = {w: [[[0.0] * 16 for _ in range(16)] for _ in range(2)] for w in range(8)}
        for kc in range(D // kKC):
            load_gu(n0, kc * kKC, kc & 1)
            for w in range(8):
                rm, cgu = (w // 4) * 2, w % 4
                bg, bu = Bs[kc & 1], Bs[kc & 1][kKC * kLdB:]
                for ks in range(kKC // 16):
                    off = cgu * 16 * kLdB + ks * 16 if KMajor else ks * 16 * kLdB + cgu * 16
                    bgf, buf = ldb(bg, off, kLdB, KMajor), ldb(bu, off, kLdB, KMajor)
                    for i in range(2):
                        af = lda(As, (rm + i) * 16 * kLdA + kc * kKC + ks * 16, kLdA)
                        mma(gf[w][i], af, bgf); mma(uf[w][i], af, buf)
        for w in range(8):
            rm, cgu = (w // 4) * 2, w % 4
            for i in range(2):
                for a in range(16):
                    for b in range(16):
                        Ss[((rm + i) * 16 + a) * kLdS + cgu * 16 + b] = swiglu7(gf[w][i][a][b], uf[w][i][a][b])
        for i in range(kBM * kNC):
            r = i // kNC; c = i % kNC; Hs[r * (kNC + kPad) + c] = Ss[r * kLdS + c]
        for w in range(8):
            rm, cy = (w // 4) * 2, (w % 4) * kYF
            for ks in range(kNC // 16):
                hf = [lda(Hs, (rm + i) * 16 * (kNC + kPad) + ks * 16, kNC + kPad) for i in range(2)]
                for j in range(kYF):
                    cn = cy + j
                    p = cn * 16 * kLdWdCol + ks * 16 if KMajor else ks * 16 * kLdWdRow + cn * 16
                    bf = ldb(Wds, p, kLdWdCol if KMajor else kLdWdRow, KMajor)
                    for i in range(2): mma(y[w][i][j], hf[i], bf)
    Ys = [0.0] * (kBM * kLdY)
    for w in range(8):
        rm, cy = (w // 4) * 2, (w % 4) * kYF
        for i in range(2):
            for j in range(kYF):
                for a in range(16):
                    for b in range(16): Ys[((rm + i) * 16 + a) * kLdY + (cy + j) * 16 + b] = y[w][i][j][a][b]
    err = 0.0
    for r in range(nrows):
        g = [sum(X[r][k] * Wg[k][n] for k in range(D)) for n in range(De)]
        u = [sum(X[r][k] * Wu[k][n] for k in range(D)) for n in range(De)]
        h = [swiglu7(g[n], u[n]) for n in range(De)]
        for d in range(D):
            ref = sum(h[n] * Wd[n][d] for n in range(De))
            err = max(err, abs(ref - Ys[r * kLdY + d]))
    print(f"D={D} De={De} kmajor={KMajor} rows={nrows}: max abs err {err:.2e}")
    return err

ok = all(run(D, 128, km, n) < 1e-9 for D, km, n in [(64, False, 50), (64, True, 64), (128, False, 37), (128, True, 5)])
print("EMULATION", "PASSED" if ok else "FAILED")
