"""Offline tools around the node: record bags with ground truth, replay them, score them.

None of this runs on the robot. ``bag_io`` writes and reads rosbag2 files,
``ground_truth`` their sidecar JSON files and ``cli`` is ``m2sa-bag``; ``replay`` drives
a live node with a bag on the bag's own time, ``scoring`` and ``report`` turn the
results into figures and pictures, ``evaluate`` is ``m2sa-bag-eval``, and ``demo`` is
``make demo`` (see docs/BAG_REPLAY.md). For the ``track`` action: ``sequences`` records
camera sequences with per-frame ground truth, ``tracking`` replays them as track goals
and ``tracking_report`` scores them per frame.
"""
