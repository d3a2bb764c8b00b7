"""`pnk eval --fit-confidence`'s fit: the code is calibration/fitting.py, one layer below the apps,
because self-calibration (run by the sync, which may not import an app) fits the same model. These
names stay importable from here for the eval code, the benches and the experiments that use them."""

from pinakes.calibration.fitting import (
    CROSS_FIT_FOLDS,
    FEATURE_SETS,
    FEATURE_SETS_BEFORE_RELATIONS,
    L2_PENALTY,
    MAX_FALSE_CONFIDENCE,
    MODEL_FEATURES,
    RERANK_FEATURE_SETS,
    ConfidenceFit,
    FitError,
    SignalModel,
    allowed_false_confidences,
    cross_fit_folds,
    cross_fitted,
    describe_fit,
    fit_confidence,
    fit_model,
    fit_thresholds,
    no_answer_needed,
    score_fit,
)

__all__ = ["CROSS_FIT_FOLDS", "FEATURE_SETS", "FEATURE_SETS_BEFORE_RELATIONS", "L2_PENALTY", "MAX_FALSE_CONFIDENCE",
           "MODEL_FEATURES", "RERANK_FEATURE_SETS", "ConfidenceFit", "FitError", "SignalModel", "allowed_false_confidences",
           "cross_fit_folds", "cross_fitted", "describe_fit", "fit_confidence", "fit_model", "fit_thresholds",
           "no_answer_needed", "score_fit"]
