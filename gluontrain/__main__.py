"""``gluontrain train <recipe> [args]`` / ``python -m gluontrain train <recipe> [args]``."""
import sys

from .registry import get_recipe, list_recipes


def main(argv=None):
    """Run ``train <recipe> ...``; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != 'train' or argv[1] not in list_recipes():
        print('usage: gluontrain train {{{}}} [recipe arguments]\n'
              '       gluontrain train yolo3 --help'.format(','.join(list_recipes())),
              file=sys.stderr)
        return 2
    recipe = get_recipe(argv[1])
    try:
        state = recipe.main(argv[2:])
    except (ValueError, FileNotFoundError) as e:
        print('error: {}'.format(e), file=sys.stderr)
        return 1
    if 'val' in state.scores:
        names, values = state.scores['val']
        print('final validation {}: {}'.format(names[-1], values[-1]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
