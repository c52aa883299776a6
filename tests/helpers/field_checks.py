"""What the adapters' option fields are held to: the core's declarations (``core.options.declarations``), and the
docs' tables built from the declarations and the adapters' check tables."""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal, Optional, Union

from verl_hadw.hf_trainer.option_fields import declared_fields

# the field type of each declaration kind (``init``: "first_batch" or a number; a command line gives text)
TYPES = {"number": float, "integer": int, "flag": bool, "text": str, "threshold": Optional[float],
         "init": Union[float, str, None]}


def expected_type(declaration: dataclasses.Field):
    m = declaration.metadata
    return Literal[m["choices"]] if m["kind"] == "choice" else TYPES[m["kind"]]


def check_fields(cls: type) -> None:
    """Every declared option is a field of ``cls`` (``hadw.anchor.eta`` -> ``hadw_anchor_eta``), in declaration
    order, with the declaration's type, default and doc; then the adapters' own two fields."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    ours = [n for n in fields if n.startswith(("hadw_", "dgpo_"))]
    assert ours == list(declared_fields()), ours
    for name, (path, declaration) in declared_fields().items():
        assert hints[name] == expected_type(declaration), (name, hints[name])
        assert fields[name].default == declaration.default, name
        assert declaration.metadata["doc"] in fields[name].metadata["help"], name
    assert hints["adv_estimator"] == Literal["hadw", "dgpo"] and fields["adv_estimator"].default == "hadw"
    assert hints["accuracy_reward_index"] == Optional[int] and fields["accuracy_reward_index"].default is None


def fields_table() -> str:
    """docs/trl.md's table of the fields."""
    rows = ["| field | verl key | default | meaning |", "|---|---|---|---|"]
    for name, (path, f) in declared_fields().items():
        default = "None" if f.default is None else repr(f.default)
        doc = f.metadata["doc"].replace("|", "\\|")  # inside a table
        rows.append(f"| `{name}` | `algorithm.{path}` | `{default}` | {doc} |")
    return "\n".join(rows)


def loss_types_table(loss_types) -> str:
    """An adapter's docs' table of its loss types under DGPO's valid-token averaging (``LossTypes``)."""
    name = loss_types.name
    rows = [f"| `{name('loss_type')}` | valid-token averaging | why |", "|---|---|---|"]
    same = f"`{name('steps_per_generation')}` = `{name('gradient_accumulation_steps')}`"
    for loss_type, (ok, why) in loss_types.table.items():
        rows.append(f"| `{loss_type}` | {f'exact (with {same})' if ok else '**refused**'} | {why} |")
    return "\n".join(rows)


def refused_settings_table(refused_settings, framework: str = "swift") -> str:
    """docs/swift.md's and docs/axolotl.md's table of an adapter's ``REFUSED_SETTINGS``: (setting, is it set?, why),
    or with the way out as a fourth column (Axolotl's)."""
    way_out = len(refused_settings[0]) == 4
    rows = [f"| {framework} setting | why it is refused |" + (" the way out |" if way_out else ""),
            "|---|---|" + ("---|" if way_out else "")]
    rows += ["| " + " | ".join([f"`{setting}`", *rest]) + " |" for setting, _, *rest in refused_settings]
    return "\n".join(rows)


def options_class(terms, name: str = "Options") -> type:
    """A stand-in for an adapter's config: ``OptionFields``' fields, named in ``terms``, with ``scale_rewards``."""
    from verl_hadw.hf_trainer.option_fields import OptionFields

    return dataclasses.make_dataclass(name, [], bases=(OptionFields,),
                                      namespace={"terms": terms, "scale_rewards": "group"})
