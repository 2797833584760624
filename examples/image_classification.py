"""Image classification with PyTorch: a folder of JPEGs, stoker's augmentations, a tiny CNN.

Run it with ``python examples/image_classification.py``. It writes a small synthetic
dataset first (two classes of 32x32 JPEGs: reddish and bluish images, in one
sub-folder per class, the layout of ImageNet and torchvision's ``ImageFolder``), then
trains a small convolutional network on it for a few steps and prints the loss.

The input pipeline is stoker's: ``sk.from_image_folder`` lists the files and takes the
class from the folder name; ``stoker.vision.train_transform`` decodes, crops, flips and
normalises each image into the batch buffer, drawing its randomness from the record's
own generator (so the batches are the same with or without workers, and after a
resume); ``stoker.torch.to_torch`` turns each batch into tensors without a copy.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import stoker as sk
from stoker.torch import to_torch

CLASSES = ("blue", "red")
IMAGES_PER_CLASS = 48
SIZE = 24  # the crop the network sees


def write_images(root: Path) -> None:
    """32x32 JPEGs, noisy, reddish or bluish by class: a task a tiny CNN learns fast."""
    rng = np.random.default_rng(0)
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for k in range(IMAGES_PER_CLASS):
            pixels = rng.integers(0, 120, (32, 32, 3))
            pixels[..., 2 if name == "blue" else 0] += 120 + label
            Image.fromarray(pixels.astype(np.uint8)).save(root / name / f"{k:03d}.jpg")


def main() -> None:
    root = Path(tempfile.mkdtemp()) / "images"
    write_images(root)

    folder = sk.from_image_folder(root)  # {"image": file bytes, "label": class index}
    assert folder.classes == list(CLASSES)
    train = sk.vision.train_transform(SIZE).apply(folder)  # -> float32 (3, SIZE, SIZE)
    loader = sk.DataLoader(train, batch_size=16, shuffle=True, seed=0, num_workers=2)

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, kernel_size=3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, len(CLASSES)),
    )
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)

    with loader:  # the two workers live across epochs; leaving the block ends them
        for epoch in range(3):
            it = iter(loader)
            for batch in to_torch(it):  # tensors sharing stoker's buffers
                logits = model(batch["image"])
                loss = torch.nn.functional.cross_entropy(logits, batch["label"])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            stats = it.stats()
            print(
                f"epoch {epoch}: loss {loss.item():.3f}, {stats.batches} batches "
                f"from {stats.num_workers} {stats.worker_mode} workers"
            )

    # Evaluate on the same images, centre-cropped, with no augmentation.
    evaluate = sk.DataLoader(sk.vision.eval_transform(SIZE).apply(folder), batch_size=32)
    correct = 0
    with torch.no_grad():
        for batch in to_torch(evaluate):
            correct += int((model(batch["image"]).argmax(1) == batch["label"]).sum())
    accuracy = correct / len(folder)
    print(f"accuracy on the training images: {accuracy:.0%}")
    assert accuracy > 0.9, "the tiny network should separate red from blue"


if __name__ == "__main__":
    main()
