"""Calibrating the confidence signal (spec §4.2; issues #25 and #41), below the apps and the sync
so that both can call it:

    fitting.py           the evidence model and its thresholds, fitted on questions of known class
                         (a golden set's outcome rows, or self-calibration's)
    questions.py         questions made from the KB's own documents by fixed rules
    self_calibration.py  those questions searched twice (as they are, and with their source left
                         out) and the model fitted on them; stored in .pinakes/ with its provenance
    on_sync.py           self-calibration run by a sync (once, bounded in time)
    shrinkage.py         a small golden set's fit shrunk towards the KB's self-calibration
"""
