"""The plugin core stands alone and leaves verl untouched until it is used (fresh processes, real ``import verl``)."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters

EXTRAS = ("scipy", "matplotlib", "math_verify")  # the modules of what [research]/[repro] bring

BATCH = """
import numpy as np, torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage
scores = torch.tensor([1., 0., 1., 1., 0., 0., 0., 1.])
rewards = torch.zeros(8, 4); rewards[:, -1] = scores
data = DataProto.from_dict(tensors={'token_level_rewards': rewards, 'response_mask': torch.ones(8, 4)},
                           non_tensors={'uid': np.array(list('aaaabbbb'), dtype=object)})
"""


def run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


WITHOUT_EXTRAS = f"""
import importlib.machinery, sys
EXTRAS = {EXTRAS!r}
class WithoutExtras(importlib.machinery.PathFinder):
    \"\"\"sys.path's finder, blind to the extras' packages: for this process they are not installed.\"\"\"
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition('.')[0] in EXTRAS:
            return None
        return super().find_spec(name, path, target)
sys.meta_path[sys.meta_path.index(importlib.machinery.PathFinder)] = WithoutExtras
"""


def test_core_runs_hadw_and_dgpo_without_scipy_matplotlib_math_verify():
    """The core depends on nothing verl does not bring: run it in a process to which the extras' packages are not
    there (sys.path's finder does not find them, as when they are not installed; a copy of site-packages without
    them would give every module a new path, and Python would compile torch and verl again for it)."""
    out = run(WITHOUT_EXTRAS + BATCH + """
for est in ('hadw', 'dgpo'):
    cfg = OmegaConf.create({'adv_estimator': est, 'norm_adv_by_std_in_grpo': True})
    adv = compute_advantage(data, est, config=cfg).batch['advantages']
    print(est, float(adv.abs().sum()) > 0)
import importlib.util
print('absent', all(importlib.util.find_spec(m) is None for m in EXTRAS))
""")
    assert out.split() == ["hadw", "True", "dgpo", "True", "absent", "True"]


def test_plain_grpo_run_leaves_verl_untouched():
    """``import verl`` loads the entry point, which registers hadw/dgpo once verl's estimator registry is imported
    (not before: a process that computes no advantage does not pay for it); Tracking.log stays verl's own until an
    estimator of ours runs."""
    out = run("""
import sys, verl
print('lazy', not {'verl.trainer.ppo.core_algos', 'verl_hadw.verl.estimators'} & set(sys.modules),
      'verl_hadw.verl.entry_point' in sys.modules)
""" + BATCH + """
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
from verl.utils.tracking import Tracking
import verl.utils.tracking as tracking_module
original = Tracking.log
print('registered', 'hadw' in ADV_ESTIMATOR_REGISTRY and 'dgpo' in ADV_ESTIMATOR_REGISTRY)
compute_advantage(data, 'grpo', config=OmegaConf.create({'adv_estimator': 'grpo', 'norm_adv_by_std_in_grpo': True}))
print('untouched_after_grpo', Tracking.log is original and Tracking.log.__module__ == tracking_module.__name__)
compute_advantage(data, 'hadw', config=OmegaConf.create({'adv_estimator': 'hadw', 'norm_adv_by_std_in_grpo': True}))
print('hooked_after_hadw', getattr(Tracking.log, '_verl_hadw_hook', False))
""")
    assert out.split() == ["lazy", "True", "True", "registered", "True", "untouched_after_grpo", "True",
                           "hooked_after_hadw", "True"]


def test_after_import_verl_every_estimator_but_hadw_and_dgpo_is_verls_own():
    """``import verl_hadw`` and ``import verl`` (which loads the plugin through the ``verl.plugins`` entry point), then
    verl's ``core_algos``: hadw and dgpo are ours, every other estimator in verl's registry is verl's own function."""
    out = run("""
import sys, verl_hadw, verl
from verl.trainer.ppo import core_algos
print('loaded', 'verl_hadw.verl.entry_point' in sys.modules)
registry = dict(core_algos.ADV_ESTIMATOR_REGISTRY)  # read only
print('ours', registry.pop('hadw').__module__, registry.pop('dgpo').__module__)
print('others', ','.join(sorted({fn.__module__ for fn in registry.values()})), 'gdpo' in registry)
""")
    assert out.split() == ["loaded", "True", "ours", "verl_hadw.verl.estimators", "verl_hadw.verl.estimators",
                           "others", "verl.trainer.ppo.core_algos", "True"]


def test_a_registration_that_fails_is_a_warning_and_verls_own_estimators_still_run():
    """verl's plugin loader keeps a broken plugin from breaking ``import verl``; the registration, run when verl's
    ``core_algos`` is imported, keeps it from breaking that import, and says so as a warning."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
import sys
sys.modules['verl_hadw.verl.estimators'] = None  # importing it now raises ImportError
import verl
""" + BATCH + """
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
print('registered', 'hadw' in ADV_ESTIMATOR_REGISTRY)
adv = compute_advantage(data, 'grpo', config=OmegaConf.create({'adv_estimator': 'grpo'})).batch['advantages']
print('grpo', float(adv.abs().sum()) > 0)
""")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["registered", "False", "grpo", "True"]
    assert "verl-hadw could not register hadw and dgpo in verl: ModuleNotFoundError" in proc.stderr


def test_log_metrics_false_keeps_verl_untouched_for_both_estimators():
    """algorithm.hadw.log_metrics governs both estimators: hadw and dgpo with it off, then dgpo with its default
    (which has nothing of HA-DW's to log), leave verl's Tracking.log as it was."""
    out = run(BATCH + """
from verl.utils.tracking import Tracking
original = Tracking.log
off = {'log_metrics': False}
compute_advantage(data, 'hadw', config=OmegaConf.create({'adv_estimator': 'hadw', 'norm_adv_by_std_in_grpo': True,
                                                         'hadw': off}))
compute_advantage(data, 'dgpo', config=OmegaConf.create({'adv_estimator': 'dgpo', 'hadw': off}))
print('untouched', Tracking.log is original)
compute_advantage(data, 'dgpo', config=OmegaConf.create({'adv_estimator': 'dgpo'}))
print('still_untouched', Tracking.log is original)
""")
    assert out.split() == ["untouched", "True", "still_untouched", "True"]
