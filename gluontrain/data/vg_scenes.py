"""The synthetic scenes of the Visual Genome writer (:func:`gluontrain.data.vg.write_vg`):
objects are shapes (the class) in a random colour (an attribute, as are ``small`` and
``large``), laid out as supports, things on and in them and free ones; predicates follow from
the boxes and the drawing order by fixed rules (:func:`predicate`), so a relation model can
learn them.
"""
import numpy as np

from . import shapes

__all__ = ['OBJECT_CLASSES', 'ATTRIBUTES', 'PREDICATES', 'predicate', 'draw_scene']

# Vocabularies are indexed 1.. in sorted order, as the original preprocessing does.
OBJECT_CLASSES = tuple(sorted(shapes.SHAPES))
ATTRIBUTES = tuple(sorted([name for name, _ in shapes.COLOURS] + ['large', 'small']))
PREDICATES = ('above', 'behind', 'below', 'far from', 'has', 'in', 'in front of', 'left of',
              'near', 'on', 'right of', 'under')
_INVERSE = {'in': 'has', 'on': 'under', 'in front of': 'behind', 'above': 'below',
            'left of': 'right of', 'near': 'near', 'far from': 'far from'}
_INVERSE.update({v: k for k, v in list(_INVERSE.items())})


def predicate(a, b, a_on_top, width, height):
    """The predicate of the ordered pair (subject ``a``, object ``b``).

    Rules, first match wins (boxes are exclusive pixel boxes at image scale):

    1. ``in`` / ``has``: one box lies inside the other (subject inside -> ``in``).
    2. ``on`` / ``under``: the subject's bottom edge sits in the top band of the object's box
       (``b.y1 <= a.y2 <= b.y1 + max(4, a.h / 5)``, subject top above it) with the subject's
       horizontal centre over the object.
    3. ``in front of`` / ``behind``: the boxes intersect; the one drawn later is in front.
    4. ``above`` / ``below``: the x-ranges overlap.
    5. ``left of`` / ``right of``: the y-ranges overlap.
    6. ``near`` if the gap between the boxes is under 12 % of the longer image side, else
       ``far from``.

    Parameters
    ----------
    a, b : sequence of 4 int
        Subject and object boxes ``(x1, y1, x2, y2)``.
    a_on_top : bool
        Whether the subject was drawn after the object.
    width, height : int
        Image size.

    Returns
    -------
    str
        One of :data:`PREDICATES`.
    """
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    if ax1 >= bx1 and ay1 >= by1 and ax2 <= bx2 and ay2 <= by2:
        return 'in'
    if bx1 >= ax1 and by1 >= ay1 and bx2 <= ax2 and by2 <= ay2:
        return 'has'
    if _sits_on(a, b):
        return 'on'
    if _sits_on(b, a):
        return 'under'
    x_overlap = min(ax2, bx2) > max(ax1, bx1)
    y_overlap = min(ay2, by2) > max(ay1, by1)
    if x_overlap and y_overlap:
        return 'in front of' if a_on_top else 'behind'
    if x_overlap:
        return 'above' if ay2 <= by1 else 'below'
    if y_overlap:
        return 'left of' if ax2 <= bx1 else 'right of'
    gap_x = max(bx1 - ax2, ax1 - bx2, 0)
    gap_y = max(by1 - ay2, ay1 - by2, 0)
    return 'near' if np.hypot(gap_x, gap_y) < 0.12 * max(width, height) else 'far from'


def _sits_on(a, b):
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, _ = b
    centre = (ax1 + ax2) / 2.0
    return (bx1 <= centre <= bx2 and ay1 < by1
            and by1 <= ay2 <= by1 + max(4.0, (ay2 - ay1) / 5.0))


def _box(rng, frac_lo, frac_hi, side):
    frac = rng.uniform(frac_lo, frac_hi)
    aspect = np.exp(rng.uniform(np.log(0.75), np.log(1.35)))
    return max(6, int(frac * side * np.sqrt(aspect))), max(6, int(frac * side / np.sqrt(aspect)))


def _fits(box, others, limit):
    return all(shapes.overlap_small(box, o) <= limit for o in others)


def _layout(rng, width, height):
    """Boxes in drawing order: supports low in the image, things on and in them, free ones."""
    side = min(width, height)
    boxes = []
    if rng.random() < 0.05:  # a few images with a single object and no relationship
        return [shapes.place_box(rng, *_box(rng, 0.2, 0.5, side), width, height)]
    supports = []
    for _ in range(int(rng.integers(1, 3))):
        for _try in range(20):
            w = int(rng.uniform(0.35, 0.55) * width)
            h = int(rng.uniform(0.2, 0.32) * height)
            x = int(rng.integers(0, width - w + 1))
            y = int(rng.integers(int(0.45 * height), height - h + 1))
            box = (x, y, x + w, y + h)
            if _fits(box, supports, 0.0):
                supports.append(box)
                break
    boxes.extend(supports)
    for sx1, sy1, sx2, sy2 in supports:
        if rng.random() < 0.75:  # something standing on the support
            w, h = _box(rng, 0.12, 0.22, side)
            lo, hi = max(0, sx1 - w // 3), min(width - w, sx2 - 2 * w // 3)
            y2 = sy1 + int(rng.integers(1, 4))
            if hi >= lo and y2 - h >= 0:
                x = int(rng.integers(lo, hi + 1))
                box = (x, y2 - h, x + w, y2)
                if _fits(box, [b for b in boxes if b not in supports], 0.2):
                    boxes.append(box)
        if rng.random() < 0.5:  # something inside the support's box
            w = int((sx2 - sx1) * rng.uniform(0.25, 0.45))
            h = int((sy2 - sy1) * rng.uniform(0.3, 0.6))
            if w >= 6 and h >= 6:
                x = int(rng.integers(sx1 + 2, sx2 - w - 1))
                y = int(rng.integers(sy1 + 2, sy2 - h - 1))
                box = (x, y, x + w, y + h)
                if _fits(box, [b for b in boxes if b not in supports], 0.2):
                    boxes.append(box)
    for _ in range(int(rng.integers(1, 4))):
        for _try in range(20):
            box = shapes.place_box(rng, *_box(rng, 0.1, 0.22, side), width, height)
            if _fits(box, boxes, 0.3):
                boxes.append(box)
                break
    return boxes


def draw_scene(rng, image_size):
    """One generated image and its scene graph.

    Parameters
    ----------
    rng : numpy.random.Generator
    image_size : int or (int, int)
        As :func:`gluontrain.data.shapes.image_size_for` takes it.

    Returns
    -------
    tuple
        ``(image, width, height, objects, rels)``: the PIL image, its size, the objects
        (``box``, ``label``, ``attributes``) in drawing order and the relations ``(subject
        index, object index, predicate)``.
    """
    width, height = shapes.image_size_for(rng, image_size)
    while True:
        boxes = _layout(rng, width, height)
        colours = []
        for k, box in enumerate(boxes):
            # A thing in or on another must not melt into it: avoid touching boxes' colours.
            taken = {colours[j] for j in range(k) if min(box[2], boxes[j][2]) >= max(
                box[0], boxes[j][0]) and min(box[3], boxes[j][3]) >= max(box[1], boxes[j][1])}
            free = [c for c in range(len(shapes.COLOURS)) if c not in taken]
            colours.append(free[int(rng.integers(0, len(free)))])
        kinds = [shapes.SHAPES[int(rng.integers(0, len(shapes.SHAPES)))] for _ in boxes]
        specs = [{'shape': k, 'rgb': shapes.COLOURS[c][1], 'box': b}
                 for k, c, b in zip(kinds, colours, boxes)]
        image, results = shapes.render(rng, width, height, specs)
        if all(r is not None and min(r['box'][2] - r['box'][0], r['box'][3] - r['box'][1]) >= 4
               for r in results):
            break
    objects = []
    for kind, colour, res in zip(kinds, colours, results):
        x1, y1, x2, y2 = res['box']
        area_frac = (x2 - x1) * (y2 - y1) / float(width * height)
        attrs = [shapes.COLOURS[colour][0]]
        if area_frac >= 0.12:
            attrs.append('large')
        elif area_frac < 0.025:
            attrs.append('small')
        objects.append({'box': res['box'], 'label': kind, 'attributes': attrs})
    rels = []
    pairs = [(i, j) for i in range(len(objects)) for j in range(i + 1, len(objects))]
    keep = min(1.0, 4.0 / max(1, len(pairs)))
    for i, j in pairs:
        pred = predicate(objects[i]['box'], objects[j]['box'], i > j, width, height)
        if pred in ('on', 'under', 'in', 'has'):
            # Mostly annotated from the smaller thing, as people describe scenes.
            if (pred in ('on', 'in')) != (rng.random() < 0.8):
                i, j, pred = j, i, _INVERSE[pred]
        elif rng.random() < keep:
            if rng.random() < 0.5:
                i, j, pred = j, i, _INVERSE[pred]
        else:
            continue
        rels.append((i, j, pred))
    return image, width, height, objects, rels
