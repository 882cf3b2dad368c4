# stable rank of W = A @ B (A: ra x k, B: k x nc, from `fused a` / `fused b` CSVs): ||W||_F^2 of W
# formed explicitly, over sigma_1^2 = the largest eigenvalue of (AᵀA)(BBᵀ) (k x k) by power iteration
BEGIN { ra = 0; rb = 0 }
FNR == 1 { f++; next }
f == 1 { n = split($0, v, ","); for (j = 1; j <= n; j++) A[ra, j - 1] = v[j]; ra++; k = n; next }
f == 2 { n = split($0, v, ","); for (j = 1; j <= n; j++) B[rb, j - 1] = v[j]; rb++; nc = n; next }
END {
    fro = 0
    for (i = 0; i < ra; i++) for (j = 0; j < nc; j++) {
        s = 0; for (t = 0; t < k; t++) s += A[i, t] * B[t, j]
        fro += s * s
    }
    for (p = 0; p < k; p++) for (q = 0; q < k; q++) {
        s = 0; for (i = 0; i < ra; i++) s += A[i, p] * A[i, q]; GA[p, q] = s
        s = 0; for (j = 0; j < nc; j++) s += B[p, j] * B[q, j]; GB[p, q] = s
    }
    for (p = 0; p < k; p++) for (q = 0; q < k; q++) { s = 0; for (t = 0; t < k; t++) s += GA[p, t] * GB[t, q]; M[p, q] = s }
    for (p = 0; p < k; p++) x[p] = 1 + p % 7
    for (it = 0; it < 3000; it++) {
        nrm = 0
        for (p = 0; p < k; p++) { s = 0; for (q = 0; q < k; q++) s += M[p, q] * x[q]; y[p] = s; nrm += s * s }
        nrm = sqrt(nrm); for (p = 0; p < k; p++) x[p] = y[p] / nrm
    }
    printf "%.9g %.9g\n", fro / nrm, sqrt(nrm)
}
