"""The pre-training objectives and training algorithms, one `Pretrainer` subclass each.

`ElectraPretrainer` (`electra.py`) is the paper's replaced token detection;
the others change only what differs from it (or, for BERT's masked LM, from
`Pretrainer`). `make_pretrainer(config)` builds the class of
`config.objective` and `config.training`.

To add an objective: a module here with a subclass that sets `OBJECTIVE`,
its line in `PRETRAINERS`, and its name in `electra_tf.config.OBJECTIVES`
(see docs/architecture.md).
"""

from __future__ import annotations

from electra_tf.config import PretrainingConfig
from electra_tf.pretraining.objectives.adversarial import AdversarialElectraPretrainer
from electra_tf.pretraining.objectives.all_tokens_mlm import AllTokensMLMPretrainer
from electra_tf.pretraining.objectives.electra import ElectraPretrainer
from electra_tf.pretraining.objectives.electra_15 import Electra15Pretrainer
from electra_tf.pretraining.objectives.electric import ElectricPretrainer
from electra_tf.pretraining.objectives.mlm import MaskedLMPretrainer
from electra_tf.pretraining.objectives.replace_mlm import ReplaceMLMPretrainer
from electra_tf.pretraining.objectives.two_stage import TwoStageElectraPretrainer
from electra_tf.pretraining.pretrainer import Pretrainer

# (objective, training) -> its class, from the classes' own OBJECTIVE and TRAINING.
PRETRAINERS = {
    (cls.OBJECTIVE, cls.TRAINING): cls
    for cls in (
        ElectraPretrainer,
        MaskedLMPretrainer,
        Electra15Pretrainer,
        ReplaceMLMPretrainer,
        AllTokensMLMPretrainer,
        ElectricPretrainer,
        AdversarialElectraPretrainer,
        TwoStageElectraPretrainer,
    )
}


def pretrainer_class(config: PretrainingConfig) -> type[Pretrainer]:
    """The `Pretrainer` subclass of `config.objective` and `config.training`."""
    try:
        return PRETRAINERS[(config.objective, config.training)]
    except KeyError:
        raise ValueError(
            f"--objective={config.objective} --training={config.training}: no "
            "such pre-training; see electra_tf.pretraining.objectives."
        ) from None


def make_pretrainer(config: PretrainingConfig, **kwargs) -> Pretrainer:
    """Builds the pretrainer of `config` (unbuilt: see `Pretrainer.build_from_batch`).

    Args:
        config: the run's `PretrainingConfig`.
        **kwargs: passed to `keras.Model` (e.g. `name`).
    """
    return pretrainer_class(config)(config, **kwargs)


__all__ = [
    "PRETRAINERS",
    "Pretrainer",
    "make_pretrainer",
    "pretrainer_class",
    "ElectraPretrainer",
    "MaskedLMPretrainer",
    "Electra15Pretrainer",
    "ReplaceMLMPretrainer",
    "AllTokensMLMPretrainer",
    "ElectricPretrainer",
    "AdversarialElectraPretrainer",
    "TwoStageElectraPretrainer",
]
