"""A detection training script shaped like torchvision's reference ``train.py``.

``get_transform`` / ``get_dataset`` / ``train_one_epoch`` / ``evaluate`` / ``main`` as in
``references/detection/`` (``train.py`` with ``engine.py``): the ``hflip`` preset with the v2
transforms (``ToImage``, flip, ``ToDtype``, ``ConvertBoundingBoxFormat``,
``SanitizeBoundingBoxes``, ``ToPureTensor``), ``CocoDetection`` wrapped for v2, images
without objects left out of training, SGD with the linear warm-up of the first epoch, and
COCO's box mAP from pycocotools. Written here for the test. The two lines marked "The
loader lines" are the only ones that differ from the torch ``DataLoader`` version
(tests/e2e/test_reference_script.py swaps them back and runs both).

Usage: python detection_reference.py --data-path COCO_ROOT [--epochs N] [--test-only] ...
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import time

import torch
import torch.utils.data
import torchvision
from pycocotools.cocoeval import COCOeval
from torchvision import tv_tensors
from torchvision.transforms import v2 as T

from dali_pipes import DALIIterator


def collate_fn(batch):  # type: ignore[no-untyped-def]
    return tuple(zip(*batch, strict=True))


def get_transform(train, args):  # type: ignore[no-untyped-def]
    steps = [T.ToImage()]
    if train and args.data_augmentation == "hflip":
        steps.append(T.RandomHorizontalFlip(p=0.5))
    steps.append(T.ToDtype(torch.float, scale=True))
    if train:
        steps += [
            T.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY),
            T.SanitizeBoundingBoxes(),
        ]
    steps.append(T.ToPureTensor())
    return T.Compose(steps)


def remove_images_without_annotations(dataset):  # type: ignore[no-untyped-def]
    dataset.ids = [i for i in dataset.ids if dataset.coco.getAnnIds(imgIds=i, iscrowd=None)]
    return dataset


def get_dataset(is_train, args):  # type: ignore[no-untyped-def]
    split = "train" if is_train else "val"
    dataset = torchvision.datasets.CocoDetection(
        os.path.join(args.data_path, f"{split}2017"),
        os.path.join(args.data_path, "annotations", f"instances_{split}2017.json"),
        transforms=get_transform(is_train, args),
    )
    if is_train:
        dataset = remove_images_without_annotations(dataset)
    keys = ["boxes", "labels", "image_id"]
    dataset = torchvision.datasets.wrap_dataset_for_transforms_v2(dataset, target_keys=keys)
    num_classes = max(dataset.coco.getCatIds()) + 1  # the category ids are the labels
    return dataset, num_classes


def train_one_epoch(model, optimizer, data_loader, device, epoch, print_freq):  # type: ignore[no-untyped-def]
    model.train()
    lr_scheduler = None
    if epoch == 0:
        warmup_iters = min(1000, len(data_loader) - 1)
        lr_scheduler = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=0.001, total_iters=warmup_iters
        )
    header = f"Epoch: [{epoch}]"
    for i, (images, targets) in enumerate(data_loader):
        start_time = time.time()
        images = [image.to(device) for image in images]
        targets = [
            {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in t.items()}
            for t in targets
        ]
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())
        if not math.isfinite(losses.item()):
            raise SystemExit(f"Loss is {losses.item()}, stopping training: {loss_dict}")
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        if lr_scheduler is not None:
            lr_scheduler.step()
        if i % print_freq == 0:
            parts = " ".join(f"{k} {v.item():.4f}" for k, v in loss_dict.items())
            rate = len(images) / (time.time() - start_time)
            print(f"{header} [{i}/{len(data_loader)}] loss {losses.item():.4f} {parts} "
                  f"lr {optimizer.param_groups[0]['lr']:.6f} img/s {rate:.1f}")  # fmt: skip


@torch.inference_mode()
def evaluate(model, data_loader, device):  # type: ignore[no-untyped-def]
    model.eval()
    coco = data_loader.dataset.coco
    results, evaluated = [], set()
    for images, targets in data_loader:
        images = [image.to(device) for image in images]
        outputs = model(images)
        for target, output in zip(targets, outputs, strict=True):
            image_id = int(target["image_id"])
            evaluated.add(image_id)
            boxes = output["boxes"].cpu()
            boxes[:, 2:] -= boxes[:, :2]  # COCO's results are x, y, width, height
            for box, score, label in zip(
                boxes.tolist(), output["scores"].tolist(), output["labels"].tolist(), strict=True
            ):
                results.append(
                    {"image_id": image_id, "category_id": label, "bbox": box, "score": score}
                )
    if len(evaluated) != len(data_loader.dataset):
        print(f"It looks like the dataset has {len(data_loader.dataset)} samples, but "
              f"{len(evaluated)} samples were used for the validation")  # fmt: skip
    print(f"Test: {len(evaluated)} images, {len(results)} detections")
    if not results:
        print("IoU metric: bbox\n Average Precision  (AP) @[ IoU=0.50:0.95 ] = 0.000")
        return 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        detections = coco.loadRes(results)
        coco_eval = COCOeval(coco, detections, "bbox")
        coco_eval.params.imgIds = sorted(evaluated)
        coco_eval.evaluate()
        coco_eval.accumulate()
    print("IoU metric: bbox")
    coco_eval.summarize()
    return float(coco_eval.stats[0])


def main(args):  # type: ignore[no-untyped-def]
    print(args)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    dataset, num_classes = get_dataset(True, args)
    dataset_test, _ = get_dataset(False, args)
    train_sampler = torch.utils.data.RandomSampler(dataset)
    test_sampler = torch.utils.data.SequentialSampler(dataset_test)  # noqa: F841
    train_batch_sampler = torch.utils.data.BatchSampler(  # noqa: F841
        train_sampler, args.batch_size, drop_last=True
    )
    # The samplers are the DataLoader version's (the loader lines below are the change).
    # The loader lines:
    data_loader = DALIIterator(dataset, batch_size=args.batch_size, train=True, drop_last=True)
    data_loader_test = DALIIterator(dataset_test, batch_size=1, train=False)

    kwargs = {"min_size": args.min_size, "max_size": args.max_size}
    model = torchvision.models.get_model(
        args.model, weights=None, weights_backbone=None, num_classes=num_classes, **kwargs
    )
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=args.wd)
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones=args.lr_steps, gamma=0.1
    )
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu", weights_only=True)
        model.load_state_dict(checkpoint["model"])
    if args.test_only:
        evaluate(model, data_loader_test, device=device)
        return
    print("Start training")
    for epoch in range(args.epochs):
        train_one_epoch(model, optimizer, data_loader, device, epoch, args.print_freq)
        lr_scheduler.step()
        if args.output_dir:
            torch.save({"model": model.state_dict(), "epoch": epoch},
                       os.path.join(args.output_dir, f"model_{epoch}.pth"))  # fmt: skip
        evaluate(model, data_loader_test, device=device)


def get_args_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="PyTorch Detection Training")
    parser.add_argument("--data-path", required=True, type=str)
    parser.add_argument("--model", default="fasterrcnn_resnet50_fpn", type=str)
    parser.add_argument("--device", default="cuda", type=str)
    parser.add_argument("-b", "--batch-size", default=2, type=int)
    parser.add_argument("--epochs", default=26, type=int)
    parser.add_argument("--lr", default=0.02, type=float)
    parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float)
    parser.add_argument("--lr-steps", default=[16, 22], nargs="+", type=int)
    parser.add_argument("--print-freq", default=20, type=int)
    parser.add_argument("--output-dir", default="", type=str)
    parser.add_argument("--resume", default="", type=str)
    parser.add_argument("--data-augmentation", default="hflip", type=str)
    parser.add_argument("--min-size", default=800, type=int)
    parser.add_argument("--max-size", default=1333, type=int)
    parser.add_argument("--seed", default=0, type=int)
    parser.add_argument("--test-only", action="store_true")
    return parser


if __name__ == "__main__":
    main(get_args_parser().parse_args())
