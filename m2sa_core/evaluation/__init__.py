"""How good the answers are: the paper's metrics and the breakdowns that say where they fail.

``metrics.py``: gIoU, cIoU, Hungarian matching, amodal and mask-type accuracy, per-split
reports. ``answer_errors.py``: what a free answer got wrong about its targets, by kind of
mistake. ``target_breakdown.py``: gIoU by what each target is and by its size. The
evaluators of training/ and the bag tools read these; inference uses only the mask
overlap of ``metrics.py``. Import the module you need (``from m2sa_core.evaluation.metrics
import ...``); this package face hands nothing on, so reading one pulls in no other.
"""
