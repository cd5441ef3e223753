"""The model's parts beyond the paper's layer: mask, position bias, normalisation, feed-forward term."""
import numpy as np
import pytest

import meanfield as mf
import solvers


def test_layer_keys_round_trip_through_the_dict():
    rng = np.random.default_rng(0)
    mlp = (rng.standard_normal((3, 5)), rng.standard_normal((5, 3)), rng.standard_normal(5))
    for kw in (dict(mask="causal", position_bias=1.5), dict(mask="causal-strict"),
               dict(normalization="mix", mix_depth=2.0), dict(normalization="ngpt", ngpt_alpha=0.5),
               dict(normalization="pre", mlp=mlp, activation="tanh")):
        m = mf.Model(beta=2.0, dim=3, **kw)
        back = mf.Model.from_dict(m.to_dict())
        assert back == m
        for key, value in kw.items():
            if key == "mlp":
                assert all(np.array_equal(a, b) for a, b in zip(back.mlp, value))
            else:
                assert getattr(back, key) == value


def test_the_paper_layer_writes_no_new_keys():
    assert set(mf.Model(beta=1.0, dim=2).to_dict()) == {"beta", "dim", "normalized", "noise", "V"}
    assert mf.Model(beta=1.0, dim=2).is_layer_standard
    assert not mf.Model(beta=1.0, dim=2, mask="causal").is_layer_standard


@pytest.mark.parametrize("kw, name", [
    (dict(mask="decoder"), "`mask`"),
    (dict(mask="causal", position_bias=-0.5), "`position_bias`"),
    (dict(mask="causal", position_bias=float("nan")), "`position_bias`"),
    (dict(mask="causal", position_bias=float("inf")), "`position_bias`"),
    (dict(position_bias=1.0), "`position_bias`"),
    (dict(normalization="layer"), "`normalization`"),
    (dict(normalization="mix"), "`mix_depth`"),
    (dict(normalization="mix", mix_depth=-1.0), "`mix_depth`"),
    (dict(mix_depth=1.0), "`mix_depth`"),
    (dict(normalization="ngpt", ngpt_alpha=0.0), "`ngpt_alpha`"),
    (dict(activation="swish"), "`activation`"),
    (dict(mlp=(np.eye(2), np.eye(3), np.zeros(3))), "`mlp`"),
    (dict(mlp=(np.eye(2), np.eye(2))), "`mlp`"),
    (dict(mlp=(np.eye(2), np.eye(2), np.array([0.0, np.nan]))), "`mlp`"),
])
def test_bad_layer_arguments_name_the_argument(kw, name):
    with pytest.raises(ValueError, match=name):
        mf.Model(beta=1.0, dim=2, **kw)


def test_choices_are_listed():
    with pytest.raises(ValueError, match="'causal-strict'"):
        mf.Model(beta=1.0, dim=2, mask="decoder")
    with pytest.raises(ValueError, match="'sqrt-depth'"):
        mf.Model(beta=1.0, dim=2, normalization="rms")


def test_a_mlp_error_states_the_shapes():
    with pytest.raises(ValueError, match=r"\(2, 2\), \(3, 3\), \(3,\)"):
        mf.Model(beta=1.0, dim=2, mlp=(np.eye(2), np.eye(3), np.zeros(3)))


def test_solvers_without_the_capability_refuse_a_mask():
    with pytest.raises(mf.UnsupportedModel, match="`mask`"):
        solvers.Gegenbauer(mf.Model(beta=1.0, dim=2, mask="causal", position_bias=1.0), lmax=16)


def test_solvers_without_the_capability_refuse_normalization_and_mlp():
    with pytest.raises(mf.UnsupportedModel, match="`normalization`"):
        solvers.Gegenbauer(mf.Model(beta=1.0, dim=4, normalization="pre"), lmax=16)
    with pytest.raises(mf.UnsupportedModel, match="`mlp`"):
        solvers.Gegenbauer(mf.Model(beta=1.0, dim=2, mlp=(np.eye(2), np.eye(2), np.zeros(2))), lmax=16)
