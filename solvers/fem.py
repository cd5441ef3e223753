"""`FiniteElements`: a P1 finite-element solver of the aggregation equation ((3.10); docs/mathematics.md §2) with dolfinx.

An independent discretisation of ∂_t ρ + div_S(ρ X[ρ]) = ν Δ_S ρ on a piecewise-flat mesh Γ_h of
S^1 (regular polygon, gdim 2, tdim 1) or S^2 (geodesic icosphere, gdim 3, tdim 2), built in numpy
(`solvers.meshes`) and handed to ``dolfinx.mesh.create_mesh``. It shares nothing with the spectral
solvers except the model.

Scheme (docs/fem.md has the details and the measured orders):

1. **Nonlocal field.** At every vertex x_i, the field (3.2) is evaluated by the lumped quadrature
   of σ_h (the normalised area measure of Γ_h, weights w_i = m_i/|Γ_h|):
       Z_i = Σ_j w_j ρ_j e^{β(⟨x_i,x_j⟩−1)},  G_i = Σ_j w_j ρ_j e^{β(⟨x_i,x_j⟩−1)} x_j,
   X_i = s P_{x_i} G_i / Z_i for (SA) (= s ∇_S ψ, ψ = (1/β) log K*ρ, (3.7)) and
   X_i = s e^β P_{x_i} G_i for (USA) (= s ∇_S φ, φ = K*ρ/β, (3.10)): the exact surface gradients of
   the quadrature potentials, finite at β = 0 (where X = s P_x m, (4.1)), with the exact rescaling
   e^{β(⟨x,y⟩−1)} ∈ [e^{−2β}, 1]. Cost O(N²(d+1)) flops, O(N·chunk) memory (rows in chunks), rows
   split over the MPI ranks and gathered (Allgatherv). Optional faster paths for the same sums:
   ``potential="fft"`` (circle: the polygon is regular, so the sums are circular convolutions,
   O(N log N), equal to round-off) and ``potential="sht"`` (sphere: spherical harmonics at the
   vertices with ducc0's non-uniform SHT, O(N + L² log L), the kernel cut where a_l/a_0 < 1e-14,
   equal to ~1e-13).
2. **Transport** (P1 with algebraic upwinding and flux correction, Kuzmin's "discrete upwinding"
   plus Zalesak's FCT limiter): with the P1 interpolant u_h of the nodal field,
   C_ij = ∫_{Γ_h} φ_j u_h·∇_Γ φ_i (assembled by dolfinx; columns sum to 0 because Σ_i φ_i = 1),
   D_ij = max(0, −C_ij, −C_ji) (i ≠ j), D_ii = −Σ_{j≠i} D_ij, L = C + D, and the low-order
   lumped ODE m_i dρ_i/dt = (Lρ)_i. L has non-negative off-diagonals and zero column sums, so:
   * mass Σ m_i ρ_i is conserved exactly (to round-off) by any Runge–Kutta step;
   * a forward-Euler step is positivity preserving when dt·|L_ii| <= m_i, hence so is SSP-RK3
     (a convex combination of Euler steps); the CFL number is checked at every stage and the
     sub-step halved if it fails.
   ``scheme="fct"`` (default) adds back the Galerkin antidiffusion f_ij = −D_ij(ρ_j − ρ_i) with
   symmetric limiter weights α_ij ∈ [0, 1] (Zalesak) that keep each value within the local
   min/max of the low-order values: still conservative and positive, and second order for smooth
   solutions (measured). ``scheme="upwind"`` is the first-order low-order scheme.
3. **Noise** (ν > 0): Lie splitting; after the transport sub-steps of a step h, one backward-Euler
   solve (M_L + hνA)ρ^{n+1} = M_L ρ^* (A the P1 stiffness matrix; PETSc KSP, LU, cached per h).
   M_L + hνA is an M-matrix on the icosphere and the polygon (no obtuse angles), so positivity and
   mass are kept; no stiffness limit on h.

Time stepping: the shared fixed-step driver `solvers.timestepping.integrate_fixed`, with outer steps
``dt`` (diffusion split) subdivided by the CFL condition. Under-resolution: the solver refuses a
mesh whose size h exceeds 1/(kernel_cells·√β) (the kernel width), and stops with `UnderResolved`
when the density's width ℓ = (|S^{d-1}|·(∫ρ)²/∫ρ²)^{1/(d-1)} falls below ``width_cells``·h.
"""
import numpy as np
from ducc0.sht.experimental import adjoint_synthesis_general, synthesis_general
from scipy.sparse import csr_matrix

from meanfield.validation import check_callable, check_density_values, check_int, check_memory, check_real
from meanfield.errors import InvalidInput, UnderResolved, UnsupportedModel
from meanfield.representations.p1 import P1Field
from .base import Solver
from .bases import ResolutionPolicy
from .spectral import SpectralVelocity
from .meshes import icosphere, mesh_size, polygon
from meanfield.transformer.kernels import minimum_degree
from meanfield.sums.kernelsums import kernel_sums
from meanfield.spaces.quadrature import gauss_legendre, trapezoid

_INSTALL = 'FiniteElements needs dolfinx: install the `fem` extra with `pip install -e ".[fem]"`.'


def _import_dolfinx():
    try:
        import netCDF4  # noqa: F401  (its HDF5 must be loaded before PETSc's, or NetCDF writes fail)
        from mpi4py import MPI  # noqa: F401  (must precede dolfinx)
        import basix.ufl  # deferred: dolfinx is heavy
        import dolfinx  # deferred: dolfinx is heavy
        import dolfinx.fem  # deferred: dolfinx is heavy
        import dolfinx.fem.petsc  # deferred: dolfinx is heavy
        import dolfinx.mesh  # deferred: dolfinx is heavy
        import ufl  # deferred: dolfinx is heavy
        from petsc4py import PETSc  # deferred: dolfinx is heavy
    except ImportError as exc:
        raise ImportError(f"{_INSTALL} ({exc})") from exc
    return MPI, basix, dolfinx, ufl, PETSc


DOLFINX_TESTED = "0.11."      # the dolfinx releases whose private CSR assembly `csr_assembly` uses


def csr_assembly():
    """dolfinx's assembly of a form into an existing CSR matrix, in place: the one use of its private
    API (``dolfinx.fem.assemble._assemble_matrix_csr``; the public ``assemble_matrix`` allocates a new
    matrix at every call). Only for the dolfinx releases it was tested with (`DOLFINX_TESTED`): another
    raises ImportError saying which is installed and which is needed."""
    import dolfinx  # deferred: dolfinx is heavy

    need = f"solvers.FiniteElements assembles with dolfinx's private `_assemble_matrix_csr`, tested with dolfinx " \
           f"{DOLFINX_TESTED}x; {_INSTALL}"
    if not dolfinx.__version__.startswith(DOLFINX_TESTED):
        raise ImportError(f"{need} (found dolfinx {dolfinx.__version__}).")
    try:
        from dolfinx.fem.assemble import _assemble_matrix_csr  # deferred: dolfinx is heavy
    except ImportError as exc:
        raise ImportError(f"{need} ({exc}).") from None
    return _assemble_matrix_csr


def reference_quadrature(dim, n):
    """A spectrally accurate quadrature for σ used to validate ρ0: midpoints on S^1, Gauss–Legendre ×
    trapezoid on S^2 (n latitudes, 2n longitudes)."""

    return trapezoid(2 * n) if dim == 2 else gauss_legendre(n, 2 * n)


def memory_estimate(vertices, dim):
    """Bytes a run on a mesh of ``vertices`` vertices needs (measured: dolfinx mesh, forms and CSR
    matrices, SSP-RK3 stages, about 1 kB per vertex on S^1 and 2 kB on S^2, plus the 2^22-entry
    blocks of the quadrature potential)."""
    return (1000 if dim == 2 else 2000) * vertices + 8 * (dim + 2) * 2 ** 22


def _rebuild(cls, args, kwargs):
    return cls(*args, **kwargs)


def _mesh(d, refinement, vertices):
    """(refinement, points, cells, cell name) of the mesh: the regular polygon of ``vertices`` (or
    16·2^refinement) vertices on S^1, the icosphere of ``refinement`` on S^2; checked against memory."""
    if d == 2:
        if vertices is None:
            refinement = check_int(refinement, "refinement", low=0)
            check_memory(memory_estimate(16 * 2 ** min(refinement, 64), d), "refinement", refinement)
            refinement = check_int(refinement, "refinement", high=16)
            vertices = 16 * 2 ** refinement
        else:
            vertices = check_int(vertices, "vertices", low=8)
            check_memory(memory_estimate(vertices, d), "vertices", vertices)
        pts, cells = polygon(check_int(vertices, "vertices", low=8, high=2 ** 22))
        return refinement, pts, cells, "interval"
    if vertices is not None:
        raise InvalidInput("`vertices` is for the circle (dim=2); on S^2 use `refinement`.")
    refinement = check_int(refinement, "refinement", low=0)
    check_memory(memory_estimate(10 * 4 ** min(refinement, 64) + 2, d), "refinement", refinement)
    refinement = check_int(refinement, "refinement", low=0, high=8)
    pts, cells = icosphere(refinement)
    return refinement, pts, cells, "triangle"


def _check_methods(potential, scheme, d):
    """The checked ``potential`` (how the kernel is summed) and ``scheme`` (the transport) on S^{d−1}."""
    if potential not in ("quadrature", "fft", "sht"):
        raise InvalidInput(f"`potential` must be 'quadrature', 'fft' (circle) or 'sht' (sphere), got {potential!r}.")
    if potential == "fft" and d != 2:
        raise InvalidInput("`potential`='fft' needs the regular polygon (dim=2); use 'quadrature' or 'sht' on S^2.")
    if potential == "sht" and d != 3:
        raise InvalidInput("`potential`='sht' is for the sphere (dim=3); use 'quadrature' or 'fft' on S^1.")
    if scheme not in ("fct", "upwind"):
        raise InvalidInput(f"`scheme` must be 'fct' (flux-corrected, default) or 'upwind' (first order), got {scheme!r}.")
    return potential, scheme


class FiniteElements(Solver):
    """P1 finite elements with algebraic upwinding and FCT on a polygon (S^1) or an icosphere (S^2).

    Parameters
    ----------
    model : `meanfield.Model`, zonal (Q^T K = I, V = v·I), ``dim`` 2 or 3.
    refinement : int >= 0
        Sphere: icosphere subdivisions (10·4^r + 2 vertices). Circle: a 16·2^r-gon (r = 2 → 64).
    vertices : int, optional
        Circle only: the number of polygon vertices (>= 8), overriding ``refinement``.
    kernel_cells : float, default 3
        Refuse meshes with h > 1/(kernel_cells·√β): the kernel must span a few cells.
    width_cells : float, default 6
        Stop with `UnderResolved` when the density's width is below ``width_cells`` mesh sizes.
    scheme : "fct" (default: flux-corrected, second order, positive) or "upwind" (first order, positive).
    potential : "quadrature" (default, O(N²)), "fft" (circle) or "sht" (sphere): the same sums, faster.
    chunk : int, rows per block of the O(N²) quadrature (memory O(N·chunk); default 2^22/N rows).
    comm : MPI communicator for the quadrature rows (default COMM_WORLD); every rank holds the mesh.
    {threads}

    Raises
    ------
    UnsupportedModel
        A non-zonal model, ``dim`` other than 2 or 3, or a model part the solver does not take.
    ValueError
        Bad ``refinement``, ``vertices``, ``kernel_cells``, ``width_cells``, ``scheme`` or ``potential``;
        a mesh too coarse for the kernel (h > 1/(kernel_cells·√β)).
    ImportError
        dolfinx is not installed (the ``fem`` extra), at the first ``solve``.

    Notes
    -----
    The stepper is "ssprk3" (`solvers.timestepping.SSPRK3`, not the adaptive pair, whose stages would
    not keep ρ >= 0): ``dt`` is the outer step (one diffusion solve per step; default min(0.05, the
    CFL step at t = 0)), subdivided so that every stage has CFL number τ·|L_ii|/m_i <= ``cfl``
    (0 < cfl <= 1, default 0.5), which guarantees positivity. Initial states: a density callable, a
    P1 Solution on the same mesh (continued), or nodal values (N,).

    Examples
    --------
    Mass is conserved to rounding and the energy increases (needs the ``fem`` extra):

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> rho0 = mf.densities.perturbed_uniform(0.2, 1, dim=2)
    >>> sol = solvers.FiniteElements(mf.Model(beta=1.0, dim=2), refinement=2).solve(rho0, [0.0, 0.5],
    ...                                                                             progress=False)
    >>> np.round(sol.mass, 12).tolist(), bool(sol.energy[1] > sol.energy[0])
    ([1.0, 1.0], True)
    """

    steppers = ("ssprk3",)
    policy = ResolutionPolicy("refinement", low=0)
    config_name = "fem"

    name = "fem"

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`; building one needs the fem extra)."""
        from meanfield.measures import densities
        from meanfield.transformer.model import Model

        return {"FiniteElements": (lambda: cls(Model(beta=2.0, dim=2), vertices=128),
                                   [densities.von_mises_fisher([1.0, 0.0], 2.0), densities.perturbed_uniform(0.2, 3)],
                                   {})}

    def __init__(self, model, refinement=4, *, vertices=None, kernel_cells=3.0, width_cells=6.0,
                 scheme="fct", potential="quadrature", chunk=None, comm=None, threads=None):
        Solver.__init__(self, model, threads)
        self._arguments = (model, refinement), dict(vertices=vertices, kernel_cells=kernel_cells,
                                                   width_cells=width_cells, scheme=scheme, potential=potential,
                                                   chunk=chunk)
        self._require_zonal()
        if model.dim not in (2, 3):
            raise UnsupportedModel(f"FiniteElements meshes S^1 (dim=2) and S^2 (dim=3); got dim={model.dim}.")
        MPI, basix, dolfinx, ufl, PETSc = _import_dolfinx()
        self._PETSc = PETSc
        self.kernel_cells = check_real(kernel_cells, "kernel_cells", low=0.0)
        self.width_cells = check_real(width_cells, "width_cells", low=0.0)
        self._chunk = None if chunk is None else check_int(chunk, "chunk", low=1)
        self.potential, self.scheme = _check_methods(potential, scheme, model.dim)
        d = model.dim
        self.refinement, pts, cells, cell_name = _mesh(d, refinement, vertices)
        self.h = mesh_size(pts, cells)
        beta = model.beta
        width = 1 / np.sqrt(abs(beta)) if beta else np.inf
        if self.kernel_cells * self.h > width:
            raise InvalidInput(
                f"the mesh is too coarse for `beta`={beta:g}: the kernel width 1/sqrt|beta| = {width:.3g} "
                f"is below kernel_cells={self.kernel_cells:g} mesh sizes (h = {self.h:.3g}); increase `refinement` "
                f"(need h <= {width / self.kernel_cells:.3g}).")
        if abs(beta) > 700 and not model.normalized:
            raise InvalidInput(f"`beta`={beta:g}: e^beta overflows for (USA); use beta <= 700.")

        # -- dolfinx objects (the mesh lives on every rank: COMM_SELF) -----------------------------
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self._MPI = MPI
        el = basix.ufl.element("Lagrange", cell_name, 1, shape=(d,))
        self.mesh = dolfinx.mesh.create_mesh(MPI.COMM_SELF, cells, el, pts)
        V = dolfinx.fem.functionspace(self.mesh, ("Lagrange", 1))
        W = dolfinx.fem.functionspace(self.mesh, ("Lagrange", 1, (d,)))
        self.V = V
        self.x = np.ascontiguousarray(V.tabulate_dof_coordinates()[:, :d])
        self.x /= np.linalg.norm(self.x, axis=1, keepdims=True)     # exact unit vectors (already on S)
        self.cells = np.asarray(V.dofmap.list, dtype=np.int64)
        self.N = self.x.shape[0]
        self.chunk = max(1, 2 ** 22 // self.N) if self._chunk is None else self._chunk   # ~32 MB blocks
        self._rep = P1Field(self.x, self.cells)
        self.m = self._rep.weights * self._rep.area                 # lumped mass m_i
        self.w = self._rep.weights                                 # σ_h quadrature weights
        wnode = np.empty(self.N, dtype=np.int64)
        wnode[np.asarray(W.dofmap.list).ravel()] = self.cells.ravel()
        self._wnode = wnode                                        # vector-P1 node -> scalar dof
        self._W = W
        rho_t, v_t = ufl.TrialFunction(V), ufl.TestFunction(V)
        self._transport = self._transport_objects()
        self._C = self._transport[2]
        dxv = ufl.dx(metadata={"quadrature_rule": "vertex", "quadrature_degree": 1})
        self._nu_h = dolfinx.fem.Constant(self.mesh, PETSc.ScalarType(0.0))
        self._form_diff = dolfinx.fem.form(rho_t * v_t * dxv + self._nu_h * ufl.inner(ufl.grad(rho_t), ufl.grad(v_t)) * ufl.dx)
        self._setup_pattern()
        # rows of the quadrature owned by this rank
        size, rank = self.comm.Get_size(), self.comm.Get_rank()
        bounds = np.linspace(0, self.N, size + 1).round().astype(int)
        self._rows = (bounds[rank], bounds[rank + 1])
        self._counts = np.diff(bounds) * (d + 2)
        self._displs = bounds[:-1] * (d + 2)
        self.field = SpectralVelocity(model, 1)
        if potential == "fft":
            self._setup_fft()
        elif potential == "sht":
            self._setup_sht()

    def __reduce__(self):
        """Pickle by the constructor's arguments (dolfinx objects are rebuilt in the receiving process);
        a solver on a communicator other than COMM_WORLD does not pickle."""
        if self.comm is not self._MPI.COMM_WORLD:
            raise TypeError("a FiniteElements solver on a custom MPI communicator cannot be pickled")
        args, kwargs = self._arguments
        return (_rebuild, (type(self), args, kwargs))

    def _transport_objects(self):
        """(velocity Function, compiled form ∫ φ_j u_h·∇φ_i, its CSR matrix): per run, since assembling
        writes into them (the form itself is compiled once and cached by dolfinx)."""
        import dolfinx.fem  # deferred: dolfinx is heavy
        import ufl  # deferred: dolfinx is heavy

        u = dolfinx.fem.Function(self._W)
        rho_t, v_t = ufl.TrialFunction(self.V), ufl.TestFunction(self.V)
        form = dolfinx.fem.form(ufl.inner(u, ufl.grad(v_t)) * rho_t * ufl.dx)
        return u, form, dolfinx.fem.create_matrix(form)

    # -- sparsity bookkeeping for the upwinding ----------------------------------------------------
    def _setup_pattern(self):
        self._assemble = csr_assembly()
        indptr = np.asarray(self._C.indptr)[: self.N + 1]
        indices = np.asarray(self._C.indices)[: indptr[-1]]
        rows = np.repeat(np.arange(self.N), np.diff(indptr))
        key = rows.astype(np.int64) * self.N + indices
        order = np.argsort(key)
        keyT = indices.astype(np.int64) * self.N + rows
        self._T = order[np.searchsorted(key[order], keyT)]          # data index of C_ji for entry (i, j)
        self._diag = rows == indices
        self._rows_of = rows
        self._nnz = indptr[-1]
        self._indptr, self._indices = indptr, indices

    def _setup_fft(self):
        theta = np.mod(np.arctan2(self.x[:, 1], self.x[:, 0]), 2 * np.pi)
        j = np.rint(theta * self.N / (2 * np.pi)).astype(int) % self.N
        if np.unique(j).size != self.N or not np.allclose(self.w, 1.0 / self.N, rtol=1e-12, atol=0):
            raise InvalidInput("`potential`='fft' needs a regular polygon.")
        self._fft_index = j
        delta = 2 * np.pi * np.arange(self.N) / self.N
        beta = self.model.beta
        k = np.exp(beta * np.cos(delta) - abs(beta))                  # scaled by e^{−|β|}, as SpectralVelocity
        self._fft_kernels = np.fft.rfft(k), np.fft.rfft(k * np.sin(delta))

    def _setup_sht(self):
        beta, x = self.model.beta, self.x
        L = minimum_degree(beta, 3)                                  # a_l/a_0 < 1e-14 beyond L
        field = SpectralVelocity(self.model, L)
        theta = np.arccos(np.clip(x[:, 2], -1.0, 1.0))
        phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
        l_of = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])   # healpy (l, m) order
        self._sht = {
            "lmax": L, "loc": np.stack([theta, phi], -1),
            "a": None if field.kernel is None else 4 * np.pi * field.kernel[l_of],
            "c": 4 * np.pi * field.potential[l_of],
            "e_theta": np.stack([np.cos(theta) * np.cos(phi), np.cos(theta) * np.sin(phi), -np.sin(theta)], -1),
            "e_phi": np.stack([-np.sin(phi), np.cos(phi), 0 * phi], -1)}

    def _velocity_sht(self, rho):
        """Same quadrature sums through spherical harmonics (ducc0 NUFFT-based SHT at the vertices):
        A_lm = Σ_j w_j ρ_j Y*_lm(x_j), Z = Σ 4π a_l A_lm Y_lm, ∇φ = Σ 4π (a_l/β) A_lm ∇Y_lm; the kernel
        expansion is cut where a_l/a_0 < 1e-14, so it matches the direct sums to ~1e-13."""

        p = self._sht
        L, loc, eps = p["lmax"], p["loc"], 1e-13
        A = adjoint_synthesis_general(map=(self.w * rho)[None, :], spin=0, lmax=L, loc=loc, epsilon=eps)
        g = synthesis_general(alm=p["c"] * A, spin=1, lmax=L, loc=loc, epsilon=eps, mode="DERIV1")
        grad = g[0][:, None] * p["e_theta"] + g[1][:, None] * p["e_phi"]       # e^{-β}∇(K*ρ)/β
        Z = None
        if self.model.normalized:
            Z = synthesis_general(alm=p["a"] * A, spin=0, lmax=L, loc=loc, epsilon=eps)[0][:, None]
        return self.field.velocity(grad, Z)

    # -- the nonlocal field ---------------------------------------------------------------------------
    def _sums(self, rho):
        """Rows (Z_i, G_i, shift_i) with Σ_j w_j ρ_j e^{β(⟨x_i,x_j⟩−1)} (1, x_j) = (Z_i, G_i)·e^{shift_i}
        at every vertex, by the shared kernel-sum engine (rows split over the MPI ranks, then gathered).

        For β > 200 each row is shifted by its largest exponent over the support of ρ (log-sum-exp),
        so that Z_i cannot underflow (e^{−2β} < 1e-174); otherwise shift_i = 0."""

        d, beta = self.model.dim, self.model.beta
        q = self.w * rho
        support = q != 0
        A = np.empty((int(support.sum()), d + 1))
        A[:, 0] = q[support]
        A[:, 1:] = q[support, None] * self.x[support]
        lo, hi = self._rows
        local = np.zeros((hi - lo, d + 2))
        if beta == 0.0:
            local[:, :d + 1] = A.sum(axis=0)
        elif support.any():
            shift = "running" if abs(beta) > 200.0 else "fixed"
            S, c = kernel_sums(self.x[lo:hi], self.x[support], A, beta, shift=shift, chunk=self.chunk)
            local[:, :d + 1] = S
            local[:, d + 1] = np.asarray(c) - abs(beta)
        if self.comm.Get_size() == 1:
            return local
        out = np.empty((self.N, d + 2))
        self.comm.Allgatherv(np.ascontiguousarray(local), [out, self._counts, self._displs, self._MPI.DOUBLE])
        return out

    def nodal_velocity(self, rho):
        """The field X[ρ] ((3.2); docs/mathematics.md §2) at the vertices, shape (N, d), by the quadrature of σ_h."""
        rho = np.asarray(rho, dtype=float)
        x = self.x
        if self.potential == "fft":
            return self._velocity_fft(rho)
        if self.potential == "sht":
            return self._velocity_sht(rho)
        S = self._sums(rho)
        Z, G, shift = S[:, :1], S[:, 1:-1], S[:, -1:]
        F = self.field.velocity(G, Z, log_shift=shift)
        return F - np.sum(F * x, axis=1, keepdims=True) * x

    def _velocity_fft(self, rho):
        j = self._fft_index
        r = np.empty(self.N)
        r[j] = rho / self.N
        fr = np.fft.rfft(r)
        # Z_i = Σ_j r_j k(θ_j − θ_i) = (r ⋆ k)_i, k even; tangential part Σ_j r_j k(δ) sin δ, δ = θ_j − θ_i
        Z = np.fft.irfft(fr * self._fft_kernels[0], n=self.N)[j]
        T = -np.fft.irfft(fr * self._fft_kernels[1], n=self.N)[j]   # k·sin is odd
        tangent = np.stack([-self.x[:, 1], self.x[:, 0]], axis=-1)
        return self.field.velocity(T, Z)[:, None] * tangent

    # -- the transport operator -------------------------------------------------------------------------
    def operator(self, rho, run=None):
        """(L, d): CSR data of the low-order operator L = C + D at ρ, and of the artificial diffusion d_ij
        (assembled in the run's own objects; without a run, in fresh ones)."""
        X = self.nodal_velocity(rho)
        if run is None:
            u, form, C = self._transport_objects()
        else:
            if "transport" not in run.workspace:
                run.workspace["transport"] = self._transport_objects()
            u, form, C = run.workspace["transport"]
        u.x.array[:] = X[self._wnode].ravel()
        C.set_value(0.0)
        self._assemble(C, form)
        c = np.asarray(C.data)[: self._nnz]
        dvals = np.maximum(0.0, -np.minimum(c, c[self._T]))
        dvals[self._diag] = 0.0
        L = c + dvals
        L[self._diag] -= np.bincount(self._rows_of, weights=dvals, minlength=self.N)
        return L, dvals

    def _apply(self, L, rho):
        return csr_matrix((L, self._indices, self._indptr), shape=(self.N, self.N)) @ rho

    def _rhs(self, run, t, state):
        """Method-of-lines right-hand side m_i dρ_i/dt = (L[ρ]ρ)_i (transport only)."""
        return self._apply(self.operator(state, run)[0], state) / self.m

    def _cfl_number(self, L, dt):
        return float(dt * np.max(-L[self._diag] / self.m))

    # -- the SSP-RK3 stepper's hooks (solvers.timestepping.SSPRK3) ----------------------------------------
    def _cfl_rate(self, run, rho):
        """max_i |L_ii|/m_i at ρ: a forward-Euler step τ is positivity preserving when τ·rate <= 1.
        The operator is kept for the first Euler stage from the same state."""
        op = self.operator(rho, run)
        run.workspace["operator_at"] = (rho, op)
        return float(np.max(-op[0][self._diag] / self.m))

    def _euler(self, run, v, tau):
        """One forward-Euler stage of the low-order scheme (limited by FCT when ``scheme="fct"``), or
        None when its CFL number τ·|L_ii|/m_i exceeds 1."""
        at, op = run.workspace.get("operator_at", (None, None))
        L, dvals = op if at is v else self.operator(v, run)
        if self._cfl_number(L, tau) > 1.0:
            return None
        low = v + tau * self._apply(L, v) / self.m
        return self._limit(v, low, dvals, tau) if self.scheme == "fct" else low

    def _split(self, run, rho, h):
        """The noise ν Δ_S over the outer step h (Lie splitting after the transport sub-steps)."""
        return self._diffuse(run, rho, h) if self.model.noise > 0 else rho

    def _limit(self, v, low, dvals, tau):
        """Zalesak's flux limiter (FCT): add back α_ij f_ij, f_ij = −d_ij(v_j − v_i) (the Galerkin
        antidiffusion), with symmetric α_ij ∈ [0, 1] keeping each value within the min/max of the
        low-order values around it; f antisymmetric and α symmetric, so mass is unchanged."""
        rows, cols = self._rows_of, self._indices
        f = -dvals * (v[cols] - v[rows])
        pos, neg = np.maximum(f, 0.0), np.minimum(f, 0.0)
        P_plus = np.bincount(rows, weights=pos, minlength=self.N)
        P_minus = np.bincount(rows, weights=neg, minlength=self.N)
        starts = self._indptr[:-1]
        upper = np.maximum.reduceat(low[cols], starts)
        lower = np.minimum.reduceat(low[cols], starts)
        Q_plus = self.m * (upper - low) / tau
        Q_minus = self.m * (lower - low) / tau
        with np.errstate(divide="ignore", invalid="ignore"):
            R_plus = np.where(P_plus > 0, np.minimum(1.0, Q_plus / P_plus), 1.0)
            R_minus = np.where(P_minus < 0, np.minimum(1.0, Q_minus / P_minus), 1.0)
        alpha = np.where(f > 0, np.minimum(R_plus[rows], R_minus[cols]), np.minimum(R_minus[rows], R_plus[cols]))
        return low + tau * np.bincount(rows, weights=alpha * f, minlength=self.N) / self.m

    def _diffuse(self, run, rho, h):
        """Backward Euler for ν Δ_S over h: (M_L + hνA) ρ_new = M_L ρ (PETSc LU, cached per h in the run)."""
        key = float(h)
        cache = run.workspace.setdefault("ksp", {})
        if key not in cache:
            import dolfinx.fem.petsc  # deferred: dolfinx is heavy

            PETSc = self._PETSc
            if len(cache) > 4:
                cache.pop(next(iter(cache)))
            self._nu_h.value = self.model.noise * h
            A = dolfinx.fem.petsc.assemble_matrix(self._form_diff)
            A.assemble()
            ksp = PETSc.KSP().create(self._MPI.COMM_SELF)
            ksp.setOperators(A)
            ksp.setType("preonly")
            ksp.getPC().setType("lu")
            b, x = A.createVecRight(), A.createVecLeft()
            cache[key] = (ksp, A, b, x)
        ksp, A, b, x = cache[key]
        b.array[:] = self.m * rho
        ksp.solve(b, x)
        return x.array.copy()

    # -- the Solver contract ------------------------------------------------------------------------------
    def _initial_from_callable(self, run, rho0, normalize):
        check_callable(rho0, "rho0")
        n = max(512, 2 * self.N) if self.model.dim == 2 else max(96, int(2 * np.sqrt(self.N)))
        xq, wq = reference_quadrature(self.model.dim, n)     # resolves ρ0 at least as well as the mesh
        check_density_values(rho0(xq), "rho0", quadrature_weights=wq, normalize=normalize)
        vals, _ = check_density_values(rho0(self.x), "rho0")
        vals = np.array(vals, dtype=float).reshape(self.N)
        mass = float(self.w @ vals)
        if mass <= 0:
            raise InvalidInput("`rho0` vanishes at every mesh vertex.")
        # the nodal interpolant has an O(h²) quadrature defect: rescale to discrete mass exactly 1
        return vals / mass

    def _initial_from_data(self, run, data, normalize):
        """Nodal values ρ_i (N,) of a P1 density on this mesh (as ``sol.data[i]``)."""
        rho = np.asarray(data, dtype=float)
        if rho.shape != (self.N,):
            raise InvalidInput(f"`initial` as nodal values must have shape ({self.N},) (the mesh vertices), got {rho.shape}.")
        rho, _ = check_density_values(rho, "initial", quadrature_weights=self.w, normalize=normalize)
        return rho.copy()

    @property
    def representation(self):
        """The `P1Field` of this mesh (what a Solution of this solver carries)."""
        return self._rep

    def _representation(self, run):
        return self._rep

    def _to_data(self, run, state):
        return np.asarray(state, dtype=float).copy()

    def width(self, rho):
        """Width ℓ = (|S^{d-1}|·(∫ρ dσ)²/∫ρ² dσ)^{1/(d-1)} of the density (2π resp. √(4π) when uniform)."""
        r = np.clip(rho, 0.0, None)
        square = float(self.w @ (r * r))
        frac = float(self.w @ r) ** 2 / square if square > 0 else np.nan     # ρ ≡ 0: no width
        return frac * 2 * np.pi if self.model.dim == 2 else np.sqrt(frac * 4 * np.pi)

    def _monitor(self, run, t, state):
        cells = self.width(state) / self.h
        if cells < self.width_cells:
            raise UnderResolved(
                f"under-resolved at t={t:.6g}: the density has concentrated to a width of {cells:.3g} mesh sizes "
                f"(< width_cells={self.width_cells:g}, h = {self.h:.3g}). Increase `refinement`, stop earlier, "
                "or lower width_cells.", t=t, width_cells=cells, tol=self.width_cells)

    def _diagnostics(self, run, t, state):
        return {"energy": self._rep.energy(self.model.beta, state), "mass": self._rep.mass(state),
                "min_density": float(np.min(state)), "width_cells": self.width(state) / self.h}
