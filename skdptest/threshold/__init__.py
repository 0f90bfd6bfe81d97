"""Generalized threshold mechanism (GTM-R) and its binary mechanisms.

A *mechanism* is an object with ``epsilon``, optional ``delta`` and
``sample(X, y, size, rng)`` returning ``size`` independent ±1 outputs on the
data (see :mod:`skdptest.threshold._mechanisms`).
"""

from ._gtm import GeneralizedThresholdMechanism, default_mechanisms
from ._mechanisms import (
    EstimatorMechanism,
    GaussianThresholdQuery,
    NoisyThresholdQuery,
    Purified,
    RandomizedResponse,
    ThresholdMechanism,
    check_mechanism,
)
from ._params import (
    RATE_CAP_FACTOR,
    StepParameters,
    constant_work_evaluations,
    gtm_evaluation_bound,
    gtm_lambda,
    gtm_p_bar,
    gtm_step_parameters,
    poisson_threshold_k,
    purification_flip_probability,
)
from ._privacy import exact_output_log_probabilities, log_poisson_cdf, log_poisson_sf
from ._results import ThresholdResult

__all__ = [
    "RATE_CAP_FACTOR",
    "EstimatorMechanism",
    "GaussianThresholdQuery",
    "GeneralizedThresholdMechanism",
    "NoisyThresholdQuery",
    "Purified",
    "RandomizedResponse",
    "StepParameters",
    "ThresholdMechanism",
    "ThresholdResult",
    "check_mechanism",
    "constant_work_evaluations",
    "default_mechanisms",
    "exact_output_log_probabilities",
    "gtm_evaluation_bound",
    "gtm_lambda",
    "gtm_p_bar",
    "gtm_step_parameters",
    "log_poisson_cdf",
    "log_poisson_sf",
    "poisson_threshold_k",
    "purification_flip_probability",
]
