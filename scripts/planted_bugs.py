# Copyright 2026 m2sa_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
The planted bugs: one-line slips the test suite must catch, as data.

A green suite says little until it has been seen to turn red. Each entry here is a
realistic one-line mistake (a wrong variable, a dropped argument, ``now`` for a stamp, an
off-by-one, a swapped pair) in the node, the pipeline, the geometry, the message
conversions, the launch file or a CLI tool, with the tests that must fail when it is in
the code. scripts/plant_bugs.py plants each one, runs those tests and puts the code back;
tests/tools/test_planted_bugs.py checks, without running anything, that every entry
still fits the code (its text is found exactly once) and names tests that exist, so a
refactor that moves the line fails there instead of silently planting nothing.

The catching tests are the fast, in-process ones wherever one exists (a DDS test only
where the behaviour shows over DDS alone, as a goal's status does), so the whole check
runs in minutes on a 2-core CPU. A slip that no test catches does not belong here: it is
a gap in the suite, and the fix is a test, then the entry.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where a bug lives: the parts of the package whose tests the check proves.
NODE = "node"  # m2sa_ros: the node, the pipeline, its parameters, tracks and tf
GEOMETRY = "geometry"  # m2sa_core/geometry and m2sa_ros/depth/
CONVERSION = "conversion"  # m2sa_ros/messages/ (conversions, masks' encoding), the label image, the answer's absence
LAUNCH = "launch"  # launch/perception.launch.py
CLI = "cli"  # m2sa_ros/bag, m2sa_ros/tools/desk_camera.py, m2sa_ros/main.py, training's CLIs, m2sa-eval's figures
AREAS = (NODE, GEOMETRY, CONVERSION, LAUNCH, CLI)


@dataclass(frozen=True)
class PlantedBug:
    """
    One planted bug: ``original`` (a unique substring of one line of ``path``) becomes ``replacement``.

    ``bug_id`` names it (``--only``); ``breaks`` says in one line what a user would see go
    wrong; ``caught_by`` are pytest selections (``file`` or ``file::test``, relative to the
    repository root) of which at least one test must fail while the bug is in.
    """

    bug_id: str
    area: str
    breaks: str
    path: str
    original: str
    replacement: str
    caught_by: tuple[str, ...]


ROBOT = "tests/ros/test_node_robot.py"
GEOMETRY_TESTS = "tests/ros/test_camera_model_image_geometry.py"
DETECTIONS = "tests/ros/test_detection_conversion.py"
FRAMES = "tests/ros/test_frame_transform.py"
LAUNCH_ARGUMENTS = "tests/ros/test_launch_arguments.py"

BUGS: tuple[PlantedBug, ...] = (
    # ------------------------------------------------------------------ the node and the pipeline
    PlantedBug(
        "request-id-not-echoed", NODE,
        "a typed command's request id is not echoed: the result carries a generated one",
        "m2sa_ros/command_intake.py",
        "request_id=msg.request_id or self.new_request_id()",
        "request_id=self.new_request_id()",
        (f"{ROBOT}::test_request_ids_on_the_typed_topic_and_the_service",)),
    PlantedBug(
        "service-request-id-overridden", NODE,
        "a service call's request id loses to the generated one (operands of `or` swapped)",
        "m2sa_ros/command_intake.py",
        "request_id=goal.request_id or request_id",
        "request_id=request_id or goal.request_id",
        (f"{ROBOT}::test_request_ids_on_the_typed_topic_and_the_service",)),
    PlantedBug(
        "command-age-from-now", NODE,
        "a stamped command's image age is measured from now instead of the command's stamp",
        "m2sa_ros/command_intake.py",
        "received_ns=stamp if stamp > 0 else self._now_ns()",
        "received_ns=self._now_ns()",
        (f"{ROBOT}::test_request_ids_on_the_typed_topic_and_the_service",)),
    PlantedBug(
        "track-scheduler-decodes-every-frame", NODE,
        "the track scheduler takes the newest frame decoded: an idle node decodes every compressed frame again",
        "m2sa_ros/tracking/track_action.py",
        "frame = camera.latest.peek()  # the key only: the track's run decodes the frame it takes",
        "frame = camera.latest.get()",
        ("tests/ros/test_node_dds.py::test_compressed_frames_are_decoded_only_when_a_command_takes_one",)),
    PlantedBug(
        "goal-answered-twice", NODE,
        "a cancelled segment goal is answered twice (cancelled, then aborted): the client gets an empty result",
        "m2sa_ros/command_intake.py",
        "elif result.success:",
        "if result.success:",
        ("tests/ros/test_node_dds.py::test_action_streams_feedback_and_honours_cancel",)),
    PlantedBug(
        "track-answered-twice", NODE,
        "a cancelled track goal is answered twice (cancelled, then aborted)",
        "m2sa_ros/tracking/track_action.py",
        "elif reason in (TIMEOUT, LOST) or reason.startswith(ABSENT_PREFIX):",
        "if reason in (TIMEOUT, LOST) or reason.startswith(ABSENT_PREFIX):",
        ("tests/ros/test_node_track.py::test_answer_then_tracked_frames_without_the_language_model_then_cancel",)),
    PlantedBug(
        "late-depth-not-rebound", NODE,
        "depth that arrives while the model runs is not bound again: the targets get no 3-D",
        "m2sa_ros/pipeline.py",
        'if depth_state == "missing":',
        'if depth_state == "refused":',
        (f"{ROBOT}::test_depth_that_arrives_during_inference_is_still_used",)),
    PlantedBug(
        "late-depth-not-waited-for", NODE,
        "a frame's depth that comes after the model's answer is not waited for (depth_wait ignored): no 3-D",
        "m2sa_ros/pipeline.py",
        "if settings is not None and settings.depth_wait > 0:",
        "if settings is not None and settings.depth_wait < 0:",
        ("tests/ros/test_node_depth_faults.py::test_a_frames_depth_that_comes_after_the_models_answer_is_waited_for",)),
    PlantedBug(
        "tf-at-latest", NODE,
        "tf is looked up at the latest time instead of the image's stamp",
        "m2sa_ros/tf/frame_transform.py",
        "time_ = Time.from_msg(stamp)",
        "time_ = Time()",
        (f"{FRAMES}::test_the_lookup_is_at_the_images_stamp_interpolated_never_the_latest",)),
    PlantedBug(
        "unknown-parameter-unnamed", NODE,
        "an unknown parameter goes unnamed: overrides are compared with themselves, not the declared names",
        "m2sa_ros/params/ros_parameters.py",
        "known = set(declared)",
        "known = set(given)",
        ("tests/ros/test_unknown_parameters.py::test_unknown_overrides_pairs_each_typo_with_its_parameter",)),
    PlantedBug(
        "track-never-lost", NODE,
        "a track is never lost: each frame's run of low scores restarts from its own fresh state",
        "m2sa_ros/tracking/tracks.py",
        "state = dataclasses.replace(state, lost_frames=self.state.lost_frames)",
        "state = dataclasses.replace(state, lost_frames=state.lost_frames)",
        ("tests/ros/test_tracks.py::test_lost_after_n_low_frames_in_a_row_and_a_good_frame_resets_the_count",)),
    # ------------------------------------------------------------------ geometry
    PlantedBug(
        "raw-distortion-ignored", GEOMETRY,
        "D (distortion) is ignored for raw images: the CameraInfo reader drops it",
        "m2sa_core/geometry/camera_model.py",
        "p=info.p, d=info.d, r=info.r,",
        "p=info.p, r=info.r,",
        (f"{GEOMETRY_TESTS}::test_raw_pixels_get_image_geometry_rays_through_k_and_d",
         "tests/ros/test_depth_camera_model.py")),
    PlantedBug(
        "roi-offset-after-binning", GEOMETRY,
        "the ROI offset is subtracted after binning instead of before: every ray of a binned ROI is off",
        "m2sa_core/geometry/camera_model.py",
        "m[0, 2] = (m[0, 2] - x_off) / bx",
        "m[0, 2] = m[0, 2] / bx - x_off",
        (f"{GEOMETRY_TESTS}::test_rectified_pixels_get_image_geometry_rays_through_p",)),
    PlantedBug(
        "rigid-transform-not-transposed", GEOMETRY,
        "points are moved by the inverse rotation (row vectors times R instead of R transposed)",
        "m2sa_core/geometry/rigid_transform.py",
        "return p @ self.rotation.T + self.translation",
        "return p @ self.rotation + self.translation",
        ("tests/core/test_rigid_transform.py::test_points_move_as_the_homogeneous_matrix_moves_them",)),
    PlantedBug(
        "pose-turned-in-wrong-order", GEOMETRY,
        "a pose's orientation is composed in the wrong order: its axes turn in the pose's frame, not the world's",
        "m2sa_core/geometry/rigid_transform.py",
        "quaternion_product(self.quaternion, quaternion)",
        "quaternion_product(quaternion, self.quaternion)",
        ("tests/core/test_rigid_transform.py::test_a_pose_turns_with_the_frame_and_keeps_its_axes_in_space",)),
    PlantedBug(
        "centroid-u-v-swapped", GEOMETRY,
        "the centroid back-projects (row, column) as (u, v): x and y of every centroid are swapped",
        "m2sa_core/geometry/centroid.py",
        "back_project(np.array([us.mean()]), np.array([vs.mean()]),",
        "back_project(np.array([vs.mean()]), np.array([us.mean()]),",
        ("tests/core/test_centroid.py",)),
    PlantedBug(
        "image-rectified-ignored", GEOMETRY,
        "image_rectified:=false is ignored by the depth step: raw pixels go through P, not K and D",
        "m2sa_ros/depth/depth_binding.py",
        "rectified=settings.image_rectified, size=depth_m.shape[::-1]",
        "rectified=True, size=depth_m.shape[::-1]",
        ("tests/ros/test_depth_camera_model.py::test_the_bound_camera_is_the_camera_info_read_as_declared",)),
    PlantedBug(
        "depth-long-before-image-bound", GEOMETRY,
        "depth stamped long before its image is bound anyway: only a later one counts against depth_tolerance",
        "m2sa_ros/depth/depth_binding.py",
        "if abs(offset) <= tolerance_ns:",
        "if offset <= tolerance_ns:",
        ("tests/ros/test_node_depth_faults.py::"
         "test_missing_depth_is_said_once_after_several_frames_naming_the_cause[stamps_outside_the_tolerance]",)),
    # ------------------------------------------------------------------ message conversions
    PlantedBug(
        "big-endian-image-read-little", CONVERSION,
        "a big-endian 16-bit image is read as little-endian",
        "m2sa_ros/messages/image_conversion.py",
        'order = ">" if msg.is_bigendian else "<"',
        'order = "<"',
        ("tests/ros/test_image_conversion.py::test_every_encoding_matches_the_cv_bridge_reference",)),
    PlantedBug(
        "bgr-read-as-rgb", CONVERSION,
        "bgr8 images are taken for rgb8: red and blue swapped",
        "m2sa_ros/messages/image_conversion.py",
        'table[f"bgr{bits}"] = _ColourLayout(base, 3, cv2.COLOR_BGR2RGB)',
        'table[f"bgr{bits}"] = _ColourLayout(base, 3, None)',
        ("tests/ros/test_image_conversion.py::test_every_encoding_matches_the_cv_bridge_reference",)),
    PlantedBug(
        "depth-millimetres-as-metres", CONVERSION,
        "16UC1 depth (millimetres) is read as metres: everything a thousand times too far",
        "m2sa_ros/messages/image_conversion.py",
        "metres = array.astype(np.float32) / 1000.0",
        "metres = array.astype(np.float32)",
        ("tests/ros/test_image_conversion.py::test_depth_16uc1_millimetres_and_zero_is_invalid",)),
    PlantedBug(
        "bbox-x-y-swapped", CONVERSION,
        "a target's bbox has its x and y offsets swapped",
        "m2sa_ros/messages/result_conversion.py",
        "msg.bbox.height = x, y, w, h",
        "msg.bbox.height = y, x, w, h",
        ("tests/ros/test_node_messages.py::test_every_field_is_mapped",)),
    PlantedBug(
        "score-not-clipped", CONVERSION,
        "a target's score leaves the documented 0..1 range",
        "m2sa_ros/messages/result_conversion.py",
        "score=float(np.clip(target.score, 0.0, 1.0)),",
        "score=float(target.score),",
        ("tests/ros/test_node_messages.py::test_every_field_is_mapped",)),
    PlantedBug(
        "target-points-always-sent", CONVERSION,
        "target_points:=false is ignored: every target's cloud is sent anyway",
        "m2sa_ros/messages/geometry_conversion.py",
        "points = geometry.points if has_pose and with_points else _NO_POINTS",
        "points = geometry.points if has_pose else _NO_POINTS",
        ("tests/ros/test_node_messages.py::test_geometry_fields_from_the_bound_depth_and_their_markers",)),
    PlantedBug(
        "detection-centre-from-width", CONVERSION,
        "a 2-D detection's centre y is computed from the box's width instead of its height",
        "m2sa_ros/messages/detection_conversion.py",
        "box.center.position.y = roi.y_offset + roi.height / 2.0",
        "box.center.position.y = roi.y_offset + roi.width / 2.0",
        (f"{DETECTIONS}::test_2d_detections_one_per_target_from_its_roi",)),
    PlantedBug(
        "detections-3d-in-optical-frame", CONVERSION,
        "3-D detections claim the image's optical frame after the result was moved into target_frame",
        "m2sa_ros/messages/detection_conversion.py",
        "frame = geometry_frame(result)",
        "frame = result.header.frame_id",
        (f"{DETECTIONS}::test_3d_detections_in_the_geometry_frame_when_the_result_names_one",)),
    PlantedBug(
        "big-endian-cloud-read-little", CONVERSION,
        "a big-endian PointCloud2 is read as little-endian",
        "m2sa_ros/messages/cloud_conversion.py",
        'order = ">" if msg.is_bigendian else "<"',
        'order = "<"',
        ("tests/ros/test_cloud_conversion.py::test_reads_padded_big_endian_organised_clouds",)),
    PlantedBug(
        "moved-cloud-keeps-optical-frame", CONVERSION,
        "a target's cloud moved into target_frame keeps the optical frame's name",
        "m2sa_ros/messages/cloud_conversion.py",
        "nanosec=int(stamp.nanosec)), frame_id=frame_id)",
        "nanosec=int(stamp.nanosec)), frame_id=msg.header.frame_id)",
        (f"{FRAMES}::test_move_result_moves_the_3d_values_as_numpy_does_and_keeps_the_image_side",)),
    # ------------------------------------------------------------------ the launch file
    PlantedBug(
        "compressed-depth-reliability-on-raw-topic", LAUNCH,
        "with use_compressed_depth, depth_reliability names the raw depth topic the node does not subscribe",
        "launch/perception.launch.py",
        'depth = "depth/compressedDepth" if compressed_depth else "depth"',
        'depth = "depth"',
        (f"{LAUNCH_ARGUMENTS}::test_compressed_depth_is_remapped_and_its_reliability_follows_it",)),
    PlantedBug(
        "respawn-reads-rviz", LAUNCH,
        "respawn:=true is read from the rviz argument (a copy-paste slip): the node is not restarted",
        "launch/perception.launch.py",
        'respawn=_flag("respawn", value["respawn"], empty=False),',
        'respawn=_flag("respawn", value["rviz"], empty=False),',
        (f"{LAUNCH_ARGUMENTS}::test_respawn_and_its_delay_reach_the_process_action",)),
    PlantedBug(
        "camera-reliability-without-camera", LAUNCH,
        "with cameras, a per-topic reliability names the topic without the camera's namespace",
        "launch/perception.launch.py",
        "where = (camera, targets[topic]) if camera else (targets[topic],)",
        "where = (targets[topic],)",
        (f"{LAUNCH_ARGUMENTS}::test_a_per_topic_reliability_is_the_qos_override_of_the_topic_the_node_subscribes",)),
    PlantedBug(
        "launch-target-frame-dropped", LAUNCH,
        "target_frame:= is declared but not handed to the node: the node stays in the optical frame",
        "launch/perception.launch.py",
        'overrides["target_frame"] = value["target_frame"].strip()',
        'value["target_frame"].strip()',
        (f"{LAUNCH_ARGUMENTS}::test_target_frame_tf_timeout_and_max_image_age_reach_the_node",
         f"{LAUNCH_ARGUMENTS}::test_every_launch_argument_the_docs_show_reaches_the_node")),
    # ------------------------------------------------------------------ CLI tools
    PlantedBug(
        "desk-camera-full-fov-angle", CLI,
        "m2sa-camera --fov uses the whole angle where the half angle belongs: the focal length is wrong",
        "m2sa_ros/tools/desk_camera.py",
        "f = (width / 2.0) / np.tan(np.deg2rad(fov_deg) / 2.0)",
        "f = (width / 2.0) / np.tan(np.deg2rad(fov_deg))",
        ("tests/ros/test_desk_camera.py::test_image_file_with_a_16_bit_depth_file",)),
    PlantedBug(
        "desk-camera-depth-in-centimetres", CLI,
        "m2sa-camera reads a 16-bit depth file as centimetres instead of millimetres",
        "m2sa_ros/tools/desk_camera.py",
        "metres = raw.astype(np.float32) / 1000.0",
        "metres = raw.astype(np.float32) / 100.0",
        ("tests/ros/test_desk_camera.py::test_image_file_with_a_16_bit_depth_file",)),
    PlantedBug(
        "bag-no-depth-ignored", CLI,
        "m2sa-bag make --no-depth still records depth",
        "m2sa_ros/bag/cli.py",
        "return None if args.no_depth else DepthOptions(",
        "return DepthOptions(",
        ("tests/ros/bag/test_bag_tracking.py::test_make_cli_records_sequences_and_refuses_bad_options_in_one_line",)),
    PlantedBug(
        "bag-frames-ignored", CLI,
        "m2sa-bag make --sequences ignores --frames",
        "m2sa_ros/bag/cli.py",
        "n_frames=6 if args.frames is None else args.frames,",
        "n_frames=6,",
        ("tests/ros/bag/test_bag_tracking.py::test_make_cli_records_sequences_and_refuses_bad_options_in_one_line",)),
    PlantedBug(
        "dead-camera-never-an-error", NODE,
        "a camera that stopped sending stays a WARN in /diagnostics: its silence is measured in minutes",
        "m2sa_ros/diagnostics/camera_health.py",
        "if limits.image_timeout > 0 and silent_s >= limits.image_timeout:",
        "if limits.image_timeout > 0 and silent_s >= limits.image_timeout * 60:",
        ("tests/ros/test_camera_health.py::test_a_camera_that_stopped_warns_on_its_stamp_then_errors_on_its_silence",)),
    PlantedBug(
        "stale-image-answered", NODE,
        "the default max_image_age is 0 again: a command on a stopped camera is answered from its last frame",
        "m2sa_ros/params/node_params.py",
        '_range("max_image_age", 1.0,',
        '_range("max_image_age", 0.0,',
        ("tests/ros/test_launch_files.py::test_params_file_values_pass_validation_and_match_the_defaults",)),
    PlantedBug(
        "track-goal-resent-under-a-new-id", CLI,
        "m2sa-bag-eval sends a track goal again under a new goal id: a lost response leaves a second track running",
        "m2sa_ros/bag/tracking.py",
        "goal_uuid=goal.goal_id).add_done_callback(goal.on_sent)",
        "goal_uuid=None).add_done_callback(goal.on_sent)",
        ("tests/ros/bag/test_track_goal_sends.py::test_a_lost_request_is_sent_again_under_the_same_id_and_accepted",)),
    PlantedBug(
        "node-gil-interval-in-milliseconds", CLI,
        "m2sa-perception sets the GIL switch interval in milliseconds where Python takes seconds",
        "m2sa_ros/main.py",
        "sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)",
        "sys.setswitchinterval(GIL_SWITCH_INTERVAL_S * 1000)",
        ("tests/ros/test_node_cli.py::test_the_node_process_hands_the_gil_back_to_the_model_thread_quickly",)),
    PlantedBug(
        "overlap-skips-own-eval-data", CLI,
        "m2sa-overlap adds a config's own eval_data to the shared list after copying it: never compared",
        "training/overlap.py",
        "evaluation.setdefault(digest, (image, source.path))",
        "fixed.setdefault(digest, (image, source.path))",
        ("tests/training/test_overlap.py::test_a_configs_own_eval_data_counts_as_evaluation_images",)),
    PlantedBug(
        "spin-dies-of-a-destroyed-action-server", NODE,
        "the spin thread ends when a cleanup destroys an action server as the wait set is built: the node goes deaf",
        "m2sa_ros/rclpy_support/executor_spin.py",
        "if not _DESTROYED_WAITABLE.search(str(exc)):",
        "if _DESTROYED_WAITABLE.search(str(exc)):",
        ("tests/ros/test_spinning.py::test_spin_goes_on_after_an_action_entity_is_destroyed_under_it",)),
    PlantedBug(
        "label-image-larger-target-wins", CONVERSION,
        "the labels image paints the smaller target first: a button vanishes under its TV",
        "m2sa_core/label_image.py",
        "key=lambda k: (-areas[k], -k))",
        "key=lambda k: (areas[k], -k))",
        ("tests/core/test_label_image.py",)),
    PlantedBug(
        "mask-crop-offset-swapped", CONVERSION,
        "a client decodes a cropped mask with the box's x and y offsets swapped: the mask lands elsewhere",
        "m2sa_ros/messages/mask_encoding.py",
        "full[y:y + h, x:x + w] = crop > 0",
        "full[x:x + h, y:y + w] = crop > 0",
        ("tests/ros/test_mask_encoding.py",)),
    PlantedBug(
        "absent-answer-reported-as-targets", CONVERSION,
        "an answer naming no target is sent as OUTCOME_TARGETS: a planner reads 'no microwave here' as found",
        "m2sa_ros/messages/result_conversion.py",
        "return SegmentationResult.OUTCOME_ABSENT, absence.missing",
        "return SegmentationResult.OUTCOME_TARGETS, absence.missing",
        ("tests/ros/test_node_messages.py::test_outcome_says_targets_absent_or_failed_and_what_is_missing",)),
    PlantedBug(
        "seg-answer-read-as-absent", CONVERSION,
        "an answer that names a target with [SEG] is read as an absence: every result says nothing is there",
        "m2sa_core/inference/absence.py",
        "if SEG_TOKEN in raw_answer:",
        "if SEG_TOKEN not in raw_answer:",
        ("tests/core/test_absence.py",)),
    PlantedBug(
        "present-rejections-not-counted", CLI,
        "m2sa-eval never counts a present command as wrongly rejected: a model that refuses everything looks safe",
        "m2sa_core/evaluation/rejection.py",
        "row[1] += bool(rejected)",
        "row[1] += 0",
        ("tests/core/test_rejection.py",)),
)
