import dataclasses

import pytest
from omegaconf import OmegaConf

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.options import AnchorConfig, DgpoConfig, HadwConfig
from verl_hadw.verl.config.run_options import parse_run


def test_defaults_from_missing_nodes():
    assert parse_run(None).hadw == HadwConfig()
    assert parse_run({"adv_estimator": "hadw"}).hadw == HadwConfig()
    assert parse_run({}).dgpo == DgpoConfig()
    cfg = parse_run({}).hadw
    assert cfg.lambda_scale == 1.3 and cfg.anchor.mode == "kalman" and cfg.anchor.window == 10
    assert cfg.anchor.sigma_source == "anchor" and cfg.anchor.eta == 16.0 and cfg.anchor.init == "first_batch"
    assert parse_run({}).dgpo.temperature == 2.0


def test_dictconfig_with_interpolation_and_nested_anchor():
    node = OmegaConf.create(
        {
            "norm_adv_by_std_in_grpo": False,
            "name": "exp1",
            "hadw": {"state_key": "${name}", "lambda_scale": 1.5, "anchor": {"mode": "moving_average", "window": 4}},
            "dgpo": {"temperature": 5.0, "dqw": False},
        }
    )
    cfg = parse_run(node).hadw
    assert cfg.state_key == "exp1" and cfg.lambda_scale == 1.5 and parse_run(node).norm_by_std is False
    assert cfg.anchor == AnchorConfig(mode="moving_average", window=4)
    dgpo = parse_run(node).dgpo
    assert dgpo.temperature == 5.0 and dgpo.dqw is False


def test_each_estimator_owns_its_options():
    """HA-DW's config holds HA-DW's options only, DGPO's DGPO's; verl's norm_adv_by_std_in_grpo and the
    metrics switch are read where they are used."""
    hadw = {f.name for f in dataclasses.fields(HadwConfig)}
    dgpo = {f.name for f in dataclasses.fields(DgpoConfig)}
    assert "dgpo" not in hadw and "norm_adv_by_std" not in hadw | dgpo
    assert parse_run({"hadw": {"log_metrics": False}}).hadw.log_metrics is False
    assert parse_run({}).hadw.log_metrics is True
    with pytest.raises(ConfigError, match="algorithm.hadw.log_metrics must be true or false"):
        parse_run({"hadw": {"log_metrics": "no"}})


@pytest.mark.parametrize(
    "node, message",
    [
        (
            {"hadw": {"lamda_scale": 1.3}},
            "Unknown key 'algorithm.hadw.lamda_scale'. Did you mean 'algorithm.hadw.lambda_scale'?",
        ),
        (
            {"hadw": {"anchor": {"windw": 3}}},
            "Unknown key 'algorithm.hadw.anchor.windw'. Did you mean 'algorithm.hadw.anchor.window'?",
        ),
        (
            {"dgpo": {"temprature": 1.0}},
            "Unknown key 'algorithm.dgpo.temprature'. Did you mean 'algorithm.dgpo.temperature'?",
        ),
        ({"hadw": {"norm_adv_by_std": False}}, "Unknown key 'algorithm.hadw.norm_adv_by_std'"),
        ({"hadw": {"lambda_scale": 0}}, "algorithm.hadw.lambda_scale=0.0 is out of range; valid: (0.0, inf]"),
        ({"hadw": {"lambda_scale": -1.3}}, "algorithm.hadw.lambda_scale=-1.3 is out of range"),
        ({"hadw": {"lambda_scale": "big"}}, "algorithm.hadw.lambda_scale must be a finite number"),
        ({"hadw": {"lambda_scale": float("nan")}}, "algorithm.hadw.lambda_scale must be a finite number"),
        ({"hadw": {"anchor": {"eta": -0.1}}}, "algorithm.hadw.anchor.eta=-0.1 is out of range; valid: [0.0, inf]"),
        (
            {"hadw": {"anchor": {"eta_min": 1.5}}},
            "algorithm.hadw.anchor.eta_min=1.5 is out of range; valid: [0.0, 1.0]",
        ),
        ({"hadw": {"anchor": {"window": 0}}}, "algorithm.hadw.anchor.window=0 is out of range; valid: an integer >= 1"),
        ({"hadw": {"anchor": {"window": 2.5}}}, "algorithm.hadw.anchor.window=2.5 is out of range"),
        (
            {"hadw": {"anchor": {"mode": "ema"}}},
            "algorithm.hadw.anchor.mode='ema' is not valid; choose one of: kalman, moving_average, fixed",
        ),
        ({"hadw": {"anchor": {"sigma_source": "posterior"}}}, "choose one of: anchor, accuracy"),
        (
            {"hadw": {"anchor": {"init": 1.5}}},
            "algorithm.hadw.anchor.init=1.5 is not valid; use 'first_batch' or a number in [0, 1]",
        ),
        ({"hadw": {"anchor": {"init": "zero"}}}, "algorithm.hadw.anchor.init='zero' is not valid"),
        (
            {"hadw": {"anchor": {"fixed_value": 2}}},
            "algorithm.hadw.anchor.fixed_value=2.0 is out of range; valid: [0.0, 1.0]",
        ),
        (
            {"hadw": {"anchor": {"include_current": "yes"}}},
            "algorithm.hadw.anchor.include_current must be true or false",
        ),
        ({"hadw": {"base": "ppo"}}, "algorithm.hadw.base='ppo' is not valid; choose one of: grpo, dgpo"),
        ({"hadw": {"state_key": ""}}, "algorithm.hadw.state_key must be a non-empty string"),
        ({"hadw": {"state_key": "exp\udc80"}}, "holds '\\udc80' at position 3, a lone surrogate that is not text"),
        ({"hadw": {"anchor": [1, 2]}}, "algorithm.hadw.anchor must be a mapping"),
        ({"dgpo": {"temperature": 0}}, "algorithm.dgpo.temperature=0.0 is out of range; valid: (0.0, inf]"),
        ({"dgpo": {"dqw": 1}}, "algorithm.dgpo.dqw must be true or false"),
        ({"norm_adv_by_std_in_grpo": "no"}, "algorithm.norm_adv_by_std_in_grpo must be true or false"),
    ],
)
def test_bad_config_names_key_and_valid_values(node, message):
    with pytest.raises(ConfigError) as err:
        parse_run(node)
    assert message in str(err.value)


def test_eta_above_one_is_valid_because_eq8_bounds_eta_t_not_eta():
    assert parse_run({"hadw": {"anchor": {"eta": 5.0}}}).hadw.anchor.eta == 5.0


def test_every_user_option_has_a_doc_and_a_check():
    import dataclasses

    from verl_hadw.core.options import AnchorConfig

    for cls in (HadwConfig, DgpoConfig, AnchorConfig):
        for f in dataclasses.fields(cls):
            if "kind" in f.metadata:
                assert f.metadata["kind"] == "section" or f.metadata["doc"], f.name
    # hidden fields are not user keys
    with pytest.raises(ConfigError, match="Unknown key 'algorithm.dgpo.norm_adv_by_std'"):
        parse_run({"dgpo": {"norm_adv_by_std": True}}).dgpo


def _declared(cls, prefix):
    for f in dataclasses.fields(cls):
        if f.metadata.get("kind") == "section":
            yield from _declared(f.default_factory, f"{prefix}{f.name}.")
        elif "kind" in f.metadata:
            yield prefix + f.name, f


VALID = {"number": 0.75, "integer": 3, "flag": True, "threshold": 0.5, "init": 0.25}


@pytest.mark.parametrize("section, cls", [("hadw", HadwConfig), ("dgpo", DgpoConfig)])
def test_numpy_scalars_are_accepted_for_every_option_as_the_value_they_stand_for(section, cls):
    import numpy as np

    to_numpy = {float: np.float32, int: np.int64, bool: np.bool_, str: np.str_}
    parse = {"hadw": lambda n: parse_run(n).hadw, "dgpo": lambda n: parse_run(n).dgpo}[section]
    for path, f in _declared(cls, ""):
        value = VALID.get(f.metadata["kind"], f.default)
        if f.metadata["kind"] == "number":
            value = min(max(value, f.metadata["lo"] + 0.5), f.metadata["hi"])
        node: dict = {}
        *parents, leaf = path.split(".")
        for numpy_form in (to_numpy[type(value)](value), value):
            inner = node
            for p in parents:
                inner = inner.setdefault(p, {})
            inner[leaf] = numpy_form
            parsed = parse({section: node})
            got = parsed
            for part in path.split("."):
                got = getattr(got, part)
            assert got == value and type(got) is type(value), (path, numpy_form, got)
    assert parse_run({"hadw": {"lambda_scale": np.float32(1.3)}}).hadw.lambda_scale == 1.3  # the example
    assert parse_run({"norm_adv_by_std_in_grpo": np.bool_(False)}).norm_by_std is False
