"""The evaluators give the figures computed by hand: COCO's mAP (pycocotools' COCOeval on
the records built from targets and predictions) and segmentation's mean IoU and pixel
accuracy (a confusion matrix, the ignore index left out)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torchvision import tv_tensors

from dali_pipes.train.coco_map import CocoRecords, coco_map
from dali_pipes.train.confusion import Confusion, scores

pytest.importorskip("pycocotools")


def target(image_id: int, boxes: list[list[float]], labels: list[int]) -> dict[str, Any]:
    return {
        "image_id": image_id,
        "boxes": tv_tensors.BoundingBoxes(
            torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
            format="XYXY",
            canvas_size=(100, 100),
        ),
        "labels": torch.tensor(labels, dtype=torch.int64),
    }


def found(boxes: list[list[float]], scores_: list[float], labels: list[int]) -> dict[str, Any]:
    return {
        "boxes": torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
        "scores": torch.tensor(scores_),
        "labels": torch.tensor(labels, dtype=torch.int64),
    }


def test_perfect_predictions_score_one_and_none_score_zero() -> None:
    truth = [
        target(1, [[10, 10, 50, 50]], [3]),
        target(2, [[0, 0, 20, 30], [40, 40, 90, 90]], [3, 5]),
    ]
    records = CocoRecords()
    records.add(
        truth,
        [found(t["boxes"].tolist(), [0.9] * len(t["labels"]), t["labels"].tolist()) for t in truth],
    )
    assert coco_map([records], [3, 5]) == pytest.approx({"map": 1.0, "map50": 1.0})
    empty = CocoRecords()
    empty.add(truth, [found([], [], []) for _ in truth])
    assert coco_map([empty], [3, 5]) == {"map": 0.0, "map50": 0.0}


def test_one_box_at_iou_0_6_counts_at_three_of_the_ten_thresholds() -> None:
    # truth [0, 0, 100, 60]; prediction [0, 0, 100, 36]: IoU 36 / 60 = 0.6, so it matches
    # at IoU 0.50, 0.55 and 0.60 (AP 1 there) and misses at the seven above (AP 0)
    records = CocoRecords()
    records.add([target(7, [[0, 0, 100, 60]], [1])], [found([[0, 0, 100, 36]], [0.8], [1])])
    result = coco_map([records], [1])
    assert result["map50"] == pytest.approx(1.0)
    assert result["map"] == pytest.approx(0.3)


def test_a_false_positive_ranked_first_halves_the_precision_at_full_recall() -> None:
    # two images, one object each; three predictions: a wrong one scored highest, then the
    # two right ones. Precision at recall 0.5 is 1/2, at recall 1.0 is 2/3; COCO's 101-point
    # interpolation takes the best precision at or beyond each recall: 2/3 everywhere.
    records = CocoRecords()
    truth = [target(1, [[10, 10, 40, 40]], [2]), target(2, [[50, 50, 90, 90]], [2])]
    outputs = [
        found([[10, 10, 40, 40], [60, 0, 90, 30]], [0.5, 0.9], [2, 2]),
        found([[50, 50, 90, 90]], [0.4], [2]),
    ]
    records.add(truth, outputs)
    assert coco_map([records], [2])["map"] == pytest.approx(2 / 3, abs=1e-6)


def test_records_of_two_ranks_evaluate_as_one_set() -> None:
    a, b = CocoRecords(), CocoRecords()
    a.add([target(1, [[10, 10, 40, 40]], [2])], [found([[10, 10, 40, 40]], [0.5], [2])])
    b.add([target(2, [[50, 50, 90, 90]], [2])], [found([[0, 0, 5, 5]], [0.9], [2])])
    whole = CocoRecords()
    whole.add(
        [target(1, [[10, 10, 40, 40]], [2]), target(2, [[50, 50, 90, 90]], [2])],
        [found([[10, 10, 40, 40]], [0.5], [2]), found([[0, 0, 5, 5]], [0.9], [2])],
    )
    assert coco_map([a, b], [2]) == coco_map([whole], [2])


def test_an_image_two_ranks_evaluated_under_padding_is_scored_once() -> None:
    """DistributedSampler pads an epoch by repeating images: an image two ranks (or one
    rank twice) evaluated counts once, so the ranks' mAP is the single process's."""
    first = [target(1, [[10, 10, 40, 40]], [2]), target(2, [[50, 50, 90, 90]], [2])]
    outputs = [found([[10, 10, 40, 40]], [0.5], [2]), found([[0, 0, 5, 5]], [0.9], [2])]
    whole = CocoRecords()
    whole.add(first, outputs)
    a, b = CocoRecords(), CocoRecords()
    a.add(first[:1], outputs[:1])
    b.add([first[1], first[0]], [outputs[1], outputs[0]])  # image 1 again: the padding
    a.add(first[:1], outputs[:1])
    single = coco_map([whole], [2])
    # the false positive ranked first, then one of the two objects: precision 1/2 up to
    # recall 1/2, none beyond; COCO's 101 recall points give 51 * 0.5 / 101
    assert single == pytest.approx({"map": 51 * 0.5 / 101, "map50": 51 * 0.5 / 101})
    assert coco_map([a, b], [2]) == single
    assert len(a.images) == len(a.truth) == len(a.found) == 1


def test_mask_map_is_scored_from_the_masks() -> None:
    mask = torch.zeros((1, 100, 100), dtype=torch.uint8)
    mask[0, 10:50, 10:50] = 1
    t = target(1, [[10, 10, 50, 50]], [4]) | {"masks": tv_tensors.Mask(mask)}
    output = found([[10, 10, 50, 50]], [0.9], [4]) | {"masks": mask[None].float()}
    records = CocoRecords(masks=True)
    records.add([t], [output])
    got = coco_map([records], [4])
    assert got == pytest.approx({"map": 1.0, "map50": 1.0, "mask_map": 1.0, "mask_map50": 1.0})


def test_mean_iou_and_pixel_accuracy_by_hand() -> None:
    truth = torch.tensor([[0, 0, 1, 1], [2, 2, 255, 255]])
    predicted = torch.tensor([[0, 1, 1, 1], [2, 0, 0, 2]])
    confusion = Confusion(3)
    confusion.add(truth, predicted)
    # pixels counted (255 left out): 6; right: (0,0) (1,1) (1,1) (2,2) = 4
    # class 0: hits 1, truth 2, predicted 2 -> 1 / 3; class 1: hits 2, truth 2,
    # predicted 3 -> 2 / 3; class 2: hits 1, truth 2, predicted 1 -> 1 / 2
    got = scores(confusion.matrix)
    assert got["pixel_acc"] == pytest.approx(4 / 6)
    assert got["miou"] == pytest.approx((1 / 3 + 2 / 3 + 1 / 2) / 3)


def test_a_class_absent_from_truth_and_predictions_is_left_out_of_the_mean() -> None:
    confusion = Confusion(4)
    confusion.add(torch.tensor([0, 0, 1]), torch.tensor([0, 0, 1]))
    assert scores(confusion.matrix) == {"miou": 1.0, "pixel_acc": 1.0}
    assert scores(torch.zeros((3, 3), dtype=torch.int64)) == {"miou": 0.0, "pixel_acc": 0.0}
