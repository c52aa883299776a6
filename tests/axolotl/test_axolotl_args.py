"""Axolotl's ``HadwArgs`` (verl_hadw/axolotl/args.py) held equal to the core's declarations: one field per option field,
declared in the class body, with its type, default and help, every key under the plugin's prefix. It imports no
Axolotl, so this file runs in the main environment too (``tests/conftest.py``), where a drift fails without Axolotl."""

import ast
import dataclasses
import importlib.util
import sys
import typing
from pathlib import Path

import pytest
from field_checks import expected_type

import verl_hadw
from verl_hadw.hf_trainer.option_fields import OptionFields, declared_fields

ARGS = Path(verl_hadw.__file__).parent / "axolotl" / "args.py"  # read by path: the package's import needs Axolotl
PREFIXES = ("hadw_", "dgpo_")


def yaml_key(field: str) -> str:
    """The field's key in the YAML: its name, or under the prefix (``adv_estimator`` -> ``hadw_adv_estimator``)."""
    return field if field.startswith(PREFIXES) else f"hadw_{field}"


@pytest.fixture(scope="module")
def args():
    spec = importlib.util.spec_from_file_location("hadw_axolotl_args", ARGS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where pydantic resolves the annotations
    try:
        spec.loader.exec_module(module)
        yield module.HadwArgs.model_fields
    finally:
        del sys.modules[spec.name]


def test_every_key_carries_the_prefix_one_per_option_field_in_order(args):
    assert list(args) == [yaml_key(f.name) for f in dataclasses.fields(OptionFields)]
    assert [k for k in args if not k.startswith(PREFIXES)] == []


def test_each_key_has_its_option_fields_type_default_and_help(args):
    hints = typing.get_type_hints(OptionFields)
    for f in dataclasses.fields(OptionFields):
        key = args[yaml_key(f.name)]
        assert (key.annotation, key.default, type(key.default)) == (hints[f.name], f.default, type(f.default)), f.name
        assert key.description == f.metadata["help"], f.name
    for name, (path, declaration) in declared_fields().items():  # and the core's declarations, directly
        assert (args[name].annotation, args[name].default) == (expected_type(declaration), declaration.default), path


def test_every_field_is_declared_in_the_class_body(args):
    """What grep and an IDE read: each field written out, not built at run time."""
    tree = ast.parse(ARGS.read_text(encoding="utf-8"))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "HadwArgs").body
    assert [n.target.id for n in body if isinstance(n, ast.AnnAssign)] == list(args)
