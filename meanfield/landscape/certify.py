"""Certification on S^1: an interval Newton (Krawczyk) test proves that a unique critical point lies in a
box, and interval bounds fix the sign of every Hessian eigenvalue (docs/mathematics.md §17.3).

The rotation is removed by fixing the first token's angle θ_1; the unknowns are θ_2..θ_n and the map is
F(θ) = (∂_{θ_2}E, ..., ∂_{θ_n}E) with Jacobian J = H[2:, 2:] (the Hessian without the first row and
column). Since H·(1, ..., 1) = 0, the inertia of J is that of the Hessian on the complement of the
rotation direction (Sylvester's law of inertia).

* **Krawczyk.** For a box X = θ̃ + [−r, r]^{n−1}, Y ≈ J(θ̃)^{−1} and an interval enclosure J(X) of the
  Jacobian over X, K(X) = θ̃ − Y F(θ̃) + (I − Y J(X))(X − θ̃). If K(X) lies in the interior of X, X holds
  exactly one zero of F (Krawczyk 1969, Moore 1977); if K(X) ∩ X is empty, it holds none.
* **Eigenvalue signs.** With V the eigenvectors of J(θ̃) (floating point), M = Vᵀ J(X) V is an interval
  matrix congruent to every J in J(X). When every Gershgorin disc of M excludes 0, each matrix in J(X)
  is non-singular and has as many negative eigenvalues as there are discs left of 0 (Gershgorin's
  theorem for connected components); so the index is proved at the unique critical point in X.

Interval arithmetic is mpmath's ``iv`` context (outward rounding, 53-bit endpoints).
"""
import mpmath
import numpy as np
from mpmath import iv

RADII = (1e-10, 1e-12, 1e-9, 1e-11, 1e-8, 1e-7)


def _box(lo, hi):
    return iv.mpf([float(lo), float(hi)])


def interval_gradient(energy, theta):
    """The gradient entries 2..n over the box ``theta`` (list of n iv intervals), as a list."""
    n, beta, C = energy.n, iv.mpf(energy.beta), energy.C
    grad = [iv.mpf(0) for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if C[i, j] != 0.0:
                u = theta[i] - theta[j]
                g = -iv.sin(u) * iv.exp(beta * iv.cos(u)) * iv.mpf(C[i, j])
                grad[i] += g
                grad[j] -= g
    return grad[1:]


def interval_derivatives(energy, theta):
    """(F, J) of the gauge-fixed problem over the box ``theta`` (list of n iv intervals; the first is
    θ_1): F the gradient entries 2..n, J the Hessian block, as lists of iv intervals."""
    n, beta, C = energy.n, iv.mpf(energy.beta), energy.C
    grad = [iv.mpf(0) for _ in range(n)]
    H = [[iv.mpf(0) for _ in range(n)] for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if C[i, j] == 0.0:
                continue
            u = theta[i] - theta[j]
            s, c = iv.sin(u), iv.cos(u)
            e = iv.exp(beta * c) * iv.mpf(C[i, j])
            g = -s * e
            grad[i] += g
            grad[j] -= g
            h = (c - beta * s * s) * e                  # H_ij = c_ij (cos u − β sin² u) e^{β cos u}
            H[i][j] = H[j][i] = h
            H[i][i] -= h
            H[j][j] -= h
    return grad[1:], [row[1:] for row in H[1:]]


def _matmul(Y, M):
    """Y (a float array, or an mpmath matrix) times M (iv matrix as lists)."""
    rows, inner = (Y.rows, Y.cols) if isinstance(Y, mpmath.matrix) else Y.shape
    Yi = [[iv.mpf(Y[i, k]) if isinstance(Y, mpmath.matrix) else iv.mpf(float(Y[i, k])) for k in range(inner)]
          for i in range(rows)]
    m = len(M[0])
    return [[sum((Yi[i][k] * M[k][j] for k in range(inner)), iv.mpf(0)) for j in range(m)] for i in range(rows)]


def krawczyk(energy, theta, radius, Y=None):
    """The Krawczyk test on the box θ̃ ± radius (θ_1 fixed): "unique", "none" or "undecided", and J(X)."""
    n = energy.n
    r = iv.mpf(radius)
    X = [iv.mpf(theta[0])] + [iv.mpf(t) + iv.mpf([-1, 1]) * r for t in theta[1:]]
    return krawczyk_box(energy, X, Y)


def krawczyk_box(energy, X, Y=None):
    """The Krawczyk test on the box X (list of n iv intervals, X[0] a point): ("unique" | "none" |
    "undecided", J(X) as lists)."""
    m = energy.n - 1
    mid = [x.mid for x in X]
    Fc = interval_gradient(energy, mid)
    _, JX = interval_derivatives(energy, X)
    if Y is None and iv.prec > 53:             # an inverse as accurate as the intervals (ill-conditioned J)
        with mpmath.mp.workprec(iv.prec):
            try:
                Y = mpmath.inverse(mpmath.matrix([[mpmath.mpf(v.mid.a._mpi_[0]) for v in row] for row in JX]))
            except ZeroDivisionError:
                return "undecided", JX
    elif Y is None:
        Jmid = np.array([[float(v.mid) for v in row] for row in JX])
        try:
            Y = np.linalg.inv(Jmid)
        except np.linalg.LinAlgError:
            return "undecided", JX
        if not np.all(np.isfinite(Y)):
            return "undecided", JX
    YJ = _matmul(Y, JX)
    YF = _matmul(Y, [[f] for f in Fc])
    inside, disjoint = True, False
    for i in range(m):
        acc = mid[i + 1] - YF[i][0]
        for k in range(m):
            coef = (iv.mpf(1) if i == k else iv.mpf(0)) - YJ[i][k]
            acc += coef * (X[k + 1] - mid[k + 1])
        x = X[i + 1]
        if not (acc.a > x.a and acc.b < x.b):               # exact comparisons of endpoints
            inside = False
        if acc.b < x.a or acc.a > x.b:
            disjoint = True
    if disjoint:
        return "none", JX
    return ("unique" if inside else "undecided"), JX


def inertia(JX, V):
    """(negative, positive) eigenvalue counts valid for every matrix in the interval matrix JX, proved by
    Gershgorin discs of Vᵀ JX V; None when a disc contains 0."""
    VJ = _matmul(V.T, JX)                                  # Vᵀ J, then (Vᵀ J) V = (Vᵀ (Vᵀ J)ᵀ)ᵀ
    M = [list(col) for col in zip(*_matmul(V.T, [list(r) for r in zip(*VJ)]))]
    neg = pos = 0
    for i in range(len(M)):
        rad = sum((abs(M[i][j]) for j in range(len(M)) if j != i), iv.mpf(0))
        if float((M[i][i] + rad).b) < 0:
            neg += 1
        elif float((M[i][i] - rad).a) > 0:
            pos += 1
        else:
            return None
    return neg, pos


def polish(energy, x, steps=4):
    """x after a few more Newton steps, the iterate with the smallest gradient (down to rounding: a point
    accepted at ‖grad‖ <= 1e-12·scale can still be 1e-8 from the zero when the Hessian is ill-conditioned)."""
    from .critical import newton

    best, gbest = x, float(np.max(np.abs(energy.gradient(x))))
    for _ in range(steps):
        x, _ = newton(energy, x, maxiter=1, tol=0.0)
        g = float(np.max(np.abs(energy.gradient(x))))
        if g < gbest:
            best, gbest = x, g
    return best


def certify_point(energy, point, radii=RADII):
    """Try to certify the `CriticalPoint` ``point`` of ``energy`` (d = 2) in place: a unique critical point
    within ``radius`` (angles, max-norm, θ_1 fixed) and its Morse index. Returns ``point``.

    First in double precision about the polished point; when that fails (nearly degenerate points, for
    example close to β = 0 where a continuum of critical points appears), again with 113-bit intervals
    about the point refined by Newton in that precision, with radii 1e-14 to 1e-10 (the box's centre is
    then within 1e-16 of ``point.points``, which are its rounding)."""
    point.points = polish(energy, point.points)
    theta = np.arctan2(point.points[:, 1], point.points[:, 0])
    theta = theta[0] + np.angle(np.exp(1j * (theta - theta[0])))     # unwrapped about θ_1
    if _certify(energy, point, list(theta), radii):
        return point
    old = iv.prec
    try:
        iv.prec = HIGH
        theta_hi = _newton_hi(energy, theta)
        if theta_hi is not None and _certify(energy, point, theta_hi, HIGH_RADII):
            t = np.array([float(v) for v in theta_hi])
            point.points = np.stack([np.cos(t), np.sin(t)], axis=1)
            return point
    finally:
        iv.prec = old
    point.certified, point.radius = False, None
    return point


HIGH = 113                                     # bits of the second attempt
HIGH_RADII = (1e-14, 1e-16, 1e-12, 1e-10)


def _newton_hi(energy, theta, iters=8):
    """θ refined by Newton in the current (high) interval precision, θ_1 fixed; None if it diverges."""
    th = [mpmath.mpf(float(t)) for t in theta]
    with mpmath.mp.workprec(iv.prec):
        for _ in range(iters):
            pts = [iv.mpf(t) for t in th]
            F, J = interval_derivatives(energy, pts)
            Fm = mpmath.matrix([mpmath.mpf(f.mid.a._mpi_[0]) for f in F])
            Jm = mpmath.matrix([[mpmath.mpf(v.mid.a._mpi_[0]) for v in row] for row in J])
            try:
                step = mpmath.lu_solve(Jm, -Fm)
            except ZeroDivisionError:
                return None
            th = [th[0]] + [th[k + 1] + step[k] for k in range(len(th) - 1)]
        return th if all(mpmath.isfinite(t) for t in th) else None


def _certify(energy, point, theta, radii):
    """The Krawczyk test and the index about ``theta`` (floats or mpf) for each radius in turn."""
    for r in radii:
        result, JX = krawczyk(energy, theta, r)
        if result != "unique":
            continue
        Jmid = np.array([[float(v.mid) for v in row] for row in JX])
        _, V = np.linalg.eigh(0.5 * (Jmid + Jmid.T))
        signs = inertia(JX, V)
        if signs is None:
            continue
        neg, pos = signs
        if neg + pos == energy.n - 1:
            # the proved inertia decides the index and the kind (floating point may misjudge an eigenvalue
            # within rounding of 0)
            point.morse_index = pos
            if point.kind != "synchronised":
                point.kind = "saddle" if pos > 0 else "local max"
            point.certified, point.radius = True, float(r)
            return True
    return False
