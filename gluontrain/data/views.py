"""Gluon's ``Dataset.transform`` for the numpy detection datasets of both YOLOv3 backends."""

__all__ = ['TransformView']


class TransformView:
    """A dataset whose ``_item(idx)`` is the raw ``(img, label)``; :meth:`transform` gives a view
    whose items go through ``fn(img, label)`` (what ``gluon.data.Dataset.transform`` does)."""
    _transform = None

    def transform(self, fn):
        """A view of this dataset whose items go through ``fn(img, label)``."""
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view._transform = fn
        return view

    def __getitem__(self, idx):
        img, label = self._item(idx)
        return (img, label) if self._transform is None else self._transform(img, label)
