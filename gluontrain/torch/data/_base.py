"""What the VOC and COCO datasets of ssd.pytorch share: the sample form (see the package),
image reading and the ``pull_item`` protocol."""
import numpy as np
import torch
import torch.utils.data as data

from gluontrain.data.checks import DatasetError
from gluontrain.data.images import read_bgr


class PullItemDataset(data.Dataset):
    """ssd.pytorch's dataset protocol (``pull_item`` / ``pull_image``) over ``self.ids``.

    Subclasses give ``_raw_target(index)`` (what ``target_transform`` reads) and
    ``_image_path(index)``, and set ``transform`` and ``target_transform``.
    """

    def __getitem__(self, index):
        """Returns ``(img [3, H, W] tensor, target float32 [N, 5])``."""
        im, gt, _, _ = self.pull_item(index)
        return im, gt

    def __len__(self):
        return len(self.ids)

    def pull_item(self, index):
        """Returns ``(img, target, height, width)``, height/width of the original image."""
        target = self._raw_target(index)
        img = self.pull_image(index)
        height, width, _ = img.shape
        if self.target_transform is not None:
            try:
                target = self.target_transform(target, width, height)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                # the reference's int('nan') / missing tag names neither file nor object
                raise DatasetError('{}: cannot convert its annotation ({}: {}); fix it or '
                                   'remove the image from the dataset'.format(
                                       self._image_context(index), type(exc).__name__,
                                       exc)) from None
        target = np.array(target, dtype=np.float64).reshape(-1, 5)  # also when empty
        if self.transform is not None:
            # copies: transforms scale boxes in place
            img, boxes, labels = self.transform(img, target[:, :4].copy(), target[:, 4].copy())
            img = img[:, :, (2, 1, 0)]  # to RGB, as the reference
            target = np.hstack((boxes, np.expand_dims(labels, axis=1)))
        img = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)
        return img, target.astype(np.float32).reshape(-1, 5), height, width

    def pull_image(self, index):
        """The original BGR uint8 image ``[H, W, 3]`` (no transform).

        Raises
        ------
        FileNotFoundError
            No file (:class:`gluontrain.data.images.ImageMissingError`, one line).
        ValueError
            A file OpenCV cannot decode (:class:`gluontrain.data.images.ImageReadError`;
            OpenCV's ``imread`` returns None silently). Both stay one line from a loader
            worker.
        """
        return read_bgr(self._image_path(index), self._image_context(index))

    def _image_context(self, index):
        """What refers to image ``index`` (subclasses name their annotation file)."""
        return 'item {} of {}'.format(index, type(self).__name__)
