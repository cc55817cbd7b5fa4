"""Rendering of the synthetic scenes: coloured shapes on a mildly textured background
(docs/datasets.md, "What the images look like").

Every class is one (shape, colour) style; shapes are polygons, so the COCO writer gets its
segmentation and every box is measured from the rendered mask (border clipping included).
Pixel boxes are ``(x1, y1, x2, y2)`` integers with ``x2``/``y2`` exclusive. ``rng`` is a
``numpy.random.Generator`` throughout.
"""
import numpy as np
from PIL import Image, ImageDraw

__all__ = ['SHAPES', 'COLOURS', 'class_style', 'shape_polygon', 'image_size_for',
           'background', 'random_layout', 'place_box', 'render', 'render_scene',
           'clip_polygon', 'clip_box', 'overlap_small', 'mask_to_rle']

SHAPES = ('circle', 'square', 'triangle', 'diamond', 'cross', 'star', 'hexagon', 'hourglass')

# Saturated colours far from the grey background (>= 74 RGB units from any grey in its range)
# and from one another (>= 80).
COLOURS = (
    ('red', (220, 40, 40)),
    ('green', (40, 170, 60)),
    ('blue', (40, 80, 225)),
    ('yellow', (240, 215, 40)),
    ('magenta', (210, 50, 210)),
    ('cyan', (40, 205, 215)),
    ('orange', (245, 135, 30)),
    ('white', (248, 248, 248)),
    ('black', (22, 22, 22)),
    ('purple', (130, 30, 200)),
)


def class_style(index):
    """``(shape, colour_name, (r, g, b))`` of the ``index``-th class a dataset draws (its
    position, not its global id): the first 8 differ in shape and colour, and all 80
    combinations of 8 shapes x 10 colours are distinct."""
    index = int(index)
    if not 0 <= index < len(SHAPES) * len(COLOURS):
        raise ValueError('class index {} out of range [0, {})'.format(
            index, len(SHAPES) * len(COLOURS)))
    rounds = index // len(SHAPES)
    shape = SHAPES[index % len(SHAPES)]
    colour_name, rgb = COLOURS[(index + rounds) % len(COLOURS)]
    return shape, colour_name, rgb


def _unit_templates():
    """Vertices of each shape in the unit square, touching all four sides."""
    ang = np.deg2rad(np.arange(0, 360, 9.0))  # multiples of 90 degrees included: exact extremes
    star_r = np.where(np.arange(10) % 2 == 0, 1.0, 0.42)
    star_a = np.deg2rad(-90 + 36 * np.arange(10))
    third = 1.0 / 3
    raw = {
        'circle': np.stack([np.cos(ang), np.sin(ang)], 1),
        'square': [(0, 0), (1, 0), (1, 1), (0, 1)],
        'triangle': [(0.5, 0), (1, 1), (0, 1)],
        'diamond': [(0.5, 0), (1, 0.5), (0.5, 1), (0, 0.5)],
        'cross': [(third, 0), (2 * third, 0), (2 * third, third), (1, third), (1, 2 * third),
                  (2 * third, 2 * third), (2 * third, 1), (third, 1), (third, 2 * third),
                  (0, 2 * third), (0, third), (third, third)],
        'star': np.stack([star_r * np.cos(star_a), star_r * np.sin(star_a)], 1),
        'hexagon': [(0.25, 0), (0.75, 0), (1, 0.5), (0.75, 1), (0.25, 1), (0, 0.5)],
        'hourglass': [(0, 0), (1, 0), (0.6, 0.5), (1, 1), (0, 1), (0.4, 0.5)],
    }
    out = {}
    for name, pts in raw.items():
        pts = np.asarray(pts, dtype=np.float64)
        pts = (pts - pts.min(0)) / (pts.max(0) - pts.min(0))
        out[name] = pts
    return out


_TEMPLATES = _unit_templates()


def shape_polygon(shape, box, pixel_centres=True):
    """``(K, 2)`` float64 vertices of ``shape`` filling the pixel box ``box`` (may extend past
    the image).

    ``pixel_centres`` True: Pillow's drawing convention, the extreme vertices on the centres of
    the first and last covered pixels; False: COCO's continuous one (pixel ``i`` spans
    ``[i, i + 1]``, the shape ``x1 .. x2``).
    """
    x1, y1, x2, y2 = [float(v) for v in box]
    shrink = 1.0 if pixel_centres else 0.0
    unit = _TEMPLATES[shape]
    return np.stack([x1 + unit[:, 0] * (x2 - x1 - shrink),
                     y1 + unit[:, 1] * (y2 - y1 - shrink)], 1)


def image_size_for(rng, image_size):
    """Draw one ``(width, height)`` from ``image_size``: a fixed side, or an inclusive
    ``(min_side, max_side)`` range drawn independently per side."""
    lo, hi = parse_image_size(image_size)
    return int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))


def parse_image_size(image_size):
    """``image_size`` (a side or a range) as an inclusive ``(min_side, max_side)`` pair."""
    if np.isscalar(image_size):
        lo = hi = int(image_size)
    else:
        lo, hi = (int(v) for v in image_size)
    if lo < 32 or hi < lo:
        raise ValueError('image_size must be a side >= 32 or a (min, max) range with '
                         '32 <= min <= max, got {!r}'.format(image_size))
    return lo, hi


def background(rng, width, height):
    """``(height, width, 3)`` float32 muted, blotched grey in [0, 255]: mostly brightness
    (about 65-205) with a faint tint, so every palette colour stands out."""
    base = rng.uniform(105.0, 165.0)
    coarse = base + rng.normal(0.0, 13.0, size=(4, 4, 1)) + rng.normal(0.0, 5.0, size=(4, 4, 3))
    fine = np.repeat(rng.normal(0.0, 6.0, size=(16, 16, 1)), 3, axis=2)
    img = _upsample(coarse, width, height) + _upsample(fine, width, height)
    return img.astype(np.float32)


def _upsample(grid, width, height):
    # Pillow's 'F' mode resizes one float channel at a time; bicubic gives smooth blotches.
    chans = [np.asarray(Image.fromarray(grid[:, :, c].astype(np.float32), mode='F')
                        .resize((width, height), Image.BICUBIC)) for c in range(grid.shape[2])]
    return np.stack(chans, 2)


def _count(rng, max_objects):
    # Mostly 1-3 objects, a fifth of the images crowded with up to max_objects.
    if max_objects >= 4 and rng.random() < 0.2:
        return int(rng.integers(4, max_objects + 1))
    return int(rng.integers(1, min(3, max_objects) + 1))


def random_layout(rng, width, height, num_classes, max_objects=8, min_frac=0.1, max_frac=0.6,
                  truncate_prob=0.15, max_overlap=0.45):
    """Place a random number of objects, some overlapping, some cut by the border.

    Parameters
    ----------
    min_frac, max_frac : float
        Object side as a fraction of the shorter image side.
    truncate_prob : float
        Chance that an object is placed partly outside the image.
    max_overlap : float
        Largest intersection over the smaller box's area (keeps every object mostly visible).

    Returns
    -------
    list of tuple
        ``(class_index, (x1, y1, x2, y2))`` full (unclipped) boxes in drawing order.
    """
    side = min(width, height)
    count = _count(rng, max_objects)
    # Crowded images get smaller objects so that they fit.
    hi_frac = max(min_frac * 1.5, min(max_frac, 1.1 / np.sqrt(count)))
    placed = []
    for _ in range(count):
        for _try in range(30):
            frac = rng.uniform(min_frac, hi_frac)
            aspect = np.exp(rng.uniform(np.log(0.7), np.log(1.45)))
            w = int(np.clip(round(frac * side * np.sqrt(aspect)), 6, width))
            h = int(np.clip(round(frac * side / np.sqrt(aspect)), 6, height))
            box = place_box(rng, w, h, width, height, rng.random() < truncate_prob)
            vis = clip_box(box, width, height)
            if vis[2] - vis[0] < 6 or vis[3] - vis[1] < 6:
                continue
            if all(overlap_small(vis, clip_box(b, width, height)) <= max_overlap
                   for _, b in placed):
                placed.append((int(rng.integers(0, num_classes)), box))
                break
    return placed


def place_box(rng, w, h, width, height, truncated=False):
    """A ``w`` x ``h`` exclusive-corner box at a random place inside the image, or
    (``truncated``) with up to a third of each side past the border."""
    if truncated:
        x1 = int(rng.integers(-w // 3, width - 2 * w // 3 + 1))
        y1 = int(rng.integers(-h // 3, height - 2 * h // 3 + 1))
    else:
        x1, y1 = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
    return x1, y1, x1 + w, y1 + h


def clip_box(box, width, height):
    """Clip an exclusive-corner pixel box to the image."""
    x1, y1, x2, y2 = box
    return max(0, x1), max(0, y1), min(width, x2), min(height, y2)


def overlap_small(a, b):
    """Intersection of two pixel boxes over the smaller one's area."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    small = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return iw * ih / float(small)


def render(rng, width, height, objects, noise=5.0):
    """Draw ``objects`` over a fresh background and measure each one's box from its mask.

    Parameters
    ----------
    objects : list of dict
        In drawing order: ``shape``, ``rgb``, ``box`` (full pixel box); optional ``parts``,
        such dicts drawn as one annotated object (a COCO crowd region).
    noise : float
        Standard deviation of the per-pixel noise.

    Returns
    -------
    image : PIL.Image.Image
    results : list of dict or None
        Per object: ``box`` (clipped, from the mask), ``polygons`` (unclipped) and ``mask``
        (bool); ``None`` where nothing of it lies inside the image.
    """
    canvas = Image.fromarray(np.clip(background(rng, width, height), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    results = []
    for obj in objects:
        parts = obj.get('parts') or [obj]
        mask_img = Image.new('L', (width, height), 0)
        mdraw = ImageDraw.Draw(mask_img)
        polys = []
        for part in parts:
            poly = shape_polygon(part['shape'], part['box'])
            pts = [tuple(p) for p in poly.tolist()]
            jitter = rng.integers(-12, 13, size=3)
            colour = tuple(int(v) for v in np.clip(np.asarray(part['rgb']) + jitter, 0, 255))
            draw.polygon(pts, fill=colour)
            mdraw.polygon(pts, fill=255)
            polys.append(poly)
        bbox = mask_img.getbbox()
        if bbox is None:
            results.append(None)
            continue
        results.append({'box': tuple(int(v) for v in bbox), 'polygons': polys,
                        'mask': np.asarray(mask_img) > 0})
    arr = np.asarray(canvas).astype(np.float32) + rng.normal(0.0, noise, (height, width, 3))
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8)), results


def render_scene(rng, image_size, num_classes, max_objects, class_names, object_size=(0.1, 0.6)):
    """Lay out, draw and measure one detection image, retrying until every object is visible.

    ``image_size`` as :func:`image_size_for`; ``object_size`` is ``(min_frac, max_frac)`` of
    :func:`random_layout`; ``class_names`` by class position. Returns ``(image, width, height,
    objects)``, each object a dict of ``name``, ``class_index``, ``box`` (clipped, from the
    mask), ``full_box`` (as laid out), ``polygons``, ``mask``.
    """
    width, height = image_size_for(rng, image_size)
    while True:
        layout = random_layout(rng, width, height, num_classes, max_objects,
                               min_frac=object_size[0], max_frac=object_size[1])
        specs = [dict(zip(('shape', 'rgb'), class_style(cls)[::2]), box=box)
                 for cls, box in layout]
        image, results = render(rng, width, height, specs)
        # A border-clipped corner of a triangle can leave an empty or sliver mask; draw again
        # rather than annotate something a detector cannot see.
        if all(r is not None and r['box'][2] - r['box'][0] >= 4 and r['box'][3] - r['box'][1] >= 4
               for r in results):
            break
    return image, width, height, [dict(res, name=class_names[cls], class_index=cls, full_box=box)
                                  for (cls, box), res in zip(layout, results)]


def clip_polygon(poly, width, height):
    """Clip a ``(K, 2)`` polygon to ``[0, width] x [0, height]`` (COCO's convention);
    ``(M, 2)``, possibly empty. Sutherland-Hodgman: enough for the shapes drawn here."""
    pts = [tuple(p) for p in np.asarray(poly, dtype=np.float64)]
    edges = ((0, 0.0, 1), (0, float(width), -1), (1, 0.0, 1), (1, float(height), -1))
    for axis, limit, sign in edges:
        if not pts:
            break
        inside = [sign * (p[axis] - limit) >= 0 for p in pts]
        out = []
        for i, cur in enumerate(pts):
            prev = pts[i - 1]
            if inside[i] != inside[i - 1]:
                t = (limit - prev[axis]) / (cur[axis] - prev[axis])
                out.append(tuple(prev[k] + t * (cur[k] - prev[k]) for k in range(2)))
            if inside[i]:
                out.append(cur)
        pts = out
    return np.asarray(pts, dtype=np.float64).reshape(-1, 2)


def mask_to_rle(mask):
    """Uncompressed COCO RLE ``{'counts': [...], 'size': [h, w]}`` of a boolean mask, as the
    real crowd annotations store it: column-major runs starting with background (maybe 0)."""
    flat = np.asarray(mask, dtype=bool).flatten(order='F')
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(bounds).tolist()
    if flat.size and flat[0]:
        runs = [0] + runs
    return {'counts': [int(r) for r in runs], 'size': [int(mask.shape[0]), int(mask.shape[1])]}
