"""Model validation and serialisation (the public `mf.Model` contract; docs/mathematics.md §1–§2)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meanfield as mf


def test_forms_and_is_zonal():
    assert mf.Model(beta=4.0, dim=3).is_zonal
    m = mf.Model(beta=4.0, dim=3, normalized=False)
    assert m.kind == "USA" and m.is_zonal and m.v == 1.0
    assert mf.Model(beta=4.0, dim=2, V=-1.0).v == -1.0
    assert mf.Model(beta=0.0, dim=2).beta == 0.0
    Q = np.diag([1.0, 2.0, 0.5])
    K = np.linalg.inv(Q).T
    assert mf.Model(beta=1.0, dim=3, Q=Q, K=K).is_zonal           # Q^T K = I
    assert not mf.Model(beta=1.0, dim=3, Q=Q).is_zonal
    assert not mf.Model(beta=1.0, dim=3, V=np.diag([1.0, 1.0, 2.0])).is_zonal
    rect = mf.Model(beta=1.0, dim=4, Q=np.ones((2, 4)), K=np.eye(4)[:2])
    assert rect.Q.shape == (2, 4) and not rect.is_zonal
    heads = mf.Model(beta=1.0, dim=3, heads=[(np.eye(3), np.eye(3), np.eye(3))] * 2)
    assert len(heads.heads) == 2 and not heads.is_zonal
    assert mf.Model(beta=1.0, dim=3, noise=0.05).noise == 0.05


def test_round_trip():
    rng = np.random.default_rng(0)
    for m in [mf.Model(beta=2.5, dim=3, normalized=False, V=-1.0, noise=0.1),
              mf.Model(beta=1.0, dim=4, Q=rng.standard_normal((2, 4)), K=rng.standard_normal((2, 4)),
                       V=rng.standard_normal((4, 4)))]:
        assert mf.Model.from_attrs(m.to_attrs()) == m
        assert mf.Model.from_dict(m.to_dict()) == m


@pytest.mark.parametrize("kwargs,match", [
    (dict(beta=-np.inf, dim=3), "beta"),
    (dict(beta=np.nan, dim=3), "beta"),
    (dict(beta=np.inf, dim=3), "beta"),
    (dict(beta=1.0, dim=1), "dim"),
    (dict(beta=1.0, dim=2.5), "dim"),
    (dict(beta=1.0, dim=3, noise=-0.1), "noise"),
    (dict(beta=1.0, dim=3, noise=np.nan), "noise"),
    (dict(beta=1.0, dim=3, normalized="yes"), "normalized"),
    (dict(beta=1.0, dim=3, V=np.eye(2)), "V"),
    (dict(beta=1.0, dim=3, V=np.nan), "V"),
    (dict(beta=1.0, dim=3, Q=np.eye(3), K=np.ones((2, 3))), "Q"),
    (dict(beta=1.0, dim=3, Q=np.ones((3, 2))), "Q"),
    (dict(beta=1.0, dim=3, K=np.full((3, 3), np.inf)), "K"),
    (dict(beta=1.0, dim=3, heads=[]), "heads"),
    (dict(beta=1.0, dim=3, heads=[(np.eye(3), np.eye(3))]), "heads"),
    (dict(beta=1.0, dim=3, Q=np.eye(3), heads=[(np.eye(3), np.eye(3), np.eye(3))]), "heads"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mf.Model(**kwargs)


def test_v_of_non_scalar_V_raises():
    with pytest.raises(ValueError, match=r"`V` is not a scalar multiple"):
        mf.Model(beta=1.0, dim=3, V=np.diag([1.0, 2.0, 3.0])).v


def test_an_unsupported_model_is_a_value_error():
    """A valid model that a function cannot treat raises `mf.UnsupportedModel`, which a caller catching
    bad input (ValueError) catches too."""
    with pytest.raises(ValueError, match="zonal") as caught:
        mf.linear_growth_rates(mf.Model(beta=1.0, dim=3, V=np.diag([1.0, 2.0, 3.0])), 4)
    assert type(caught.value) is mf.UnsupportedModel


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 7), i=st.integers(0, 6), j=st.integers(0, 6), eps=st.sampled_from([0.0, 1e-14, 1e-9, -1e-6]),
       v=st.sampled_from([1.0, -1.0, 2.5]))
def test_is_zonal_is_the_identity_check(d, i, j, eps, v):
    """`is_zonal` (Q^T K = I, V = v·I to 1e-12) without the d × d product for the default heads:
    a perturbation eps at any entry of V, Q or K is accepted exactly when |eps| <= 1e-12."""
    i, j = i % d, j % d
    E = np.zeros((d, d))
    E[i, j] = eps
    ok = abs(eps) <= 1e-12
    assert mf.Model(beta=1.0, dim=d, V=v * np.eye(d) + E).is_zonal == ok
    assert mf.Model(beta=1.0, dim=d, Q=np.eye(d) + E).is_zonal == ok
    assert mf.Model(beta=1.0, dim=d, K=np.eye(d) + E).is_zonal == ok


def test_default_heads_share_a_read_only_identity():
    m = mf.Model(beta=1.0, dim=64)
    assert m.Q is m.K and not m.Q.flags.writeable and np.array_equal(m.Q, np.eye(64))
    assert m.is_zonal and m.v == 1.0
    R = np.linalg.qr(np.random.default_rng(0).standard_normal((5, 5)))[0]
    assert mf.Model(beta=1.0, dim=5, Q=R, K=R).is_zonal                  # Q^T K = I with Q, K not I
    assert not mf.Model(beta=1.0, dim=5, Q=R).is_zonal
