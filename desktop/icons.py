"""The app icon and the tray's state icons, drawn with Pillow: this code is the artwork's source of truth.

The mark is the dashboard's logo, a honey hexagon (a hive cell) with note lines. Each state has its own shape, so it
reads without colour: filled (running), filling (starting), empty outline (stopped), "!" (error).
`python -m hivenote.desktop.icons write-assets [DIR]` regenerates the PNGs committed in assets/icons/.
"""

from __future__ import annotations

import importlib.resources
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageChops, ImageDraw, ImageFont

STATES = ("running", "starting", "stopped", "error")
MIN_SIZE = 16
ASSET_SIZES = {"app": 256, "state": 64}

HONEY = "#f5a524"  # the dashboard logo's colours
INK = "#1f1300"
GREY = "#8a9099"  # mid grey: visible on light and dark panels alike
RED = "#e03131"
BADGE = "#1864ab"  # blue: not a state colour, and white text on it passes WCAG AA
WHITE = "#ffffff"

_SCALE = 4  # drawn at 4x, then downsampled with LANCZOS for smooth edges
_FAINT = 8  # alpha below this after downsampling is ringing, not coverage
_APOTHEM = 0.41  # the hexagon's centre-to-side distance; its points reach 0.5 +- 0.473
_CORNER = 0.06
_STROKE = 0.09  # outlines
_GAP = 0.045  # between an outline and what it holds
_LINE = 0.07  # the note lines and the "!"


def tray_icon(state: str, agents: int = 0, size: int = 64, *, warning: bool = False) -> Image.Image:
    """The tray icon for a server `state`, with the number of connected agents as a badge while running, and a
    red "!" dot in the top-right corner while running with a `warning` (sync is failing)."""
    if state not in STATES:
        raise ValueError(f"unknown tray state {state!r}; expected one of {', '.join(STATES)}")
    if agents < 0:
        raise ValueError(f"the number of agents cannot be negative: {agents}")
    icon = _downsample(_mark(state, _canvas_size(size)), size)
    if state == "running" and agents > 0:
        _add_badge(icon, "+" if agents > 9 else str(agents))  # one glyph: two do not read at 22-24 px
    if state == "running" and warning:
        _add_warning(icon)
    return _without_ringing(icon)


def app_icon(size: int) -> Image.Image:
    """The application icon for menus and launchers: the running mark without a badge."""
    return _without_ringing(_downsample(_mark("running", _canvas_size(size)), size))


def assets_dir() -> Path:
    """The installed copy of assets/icons/ (the package `hivenote.assets`)."""
    icons = importlib.resources.files("hivenote.assets") / "icons"
    if not isinstance(icons, Path):  # a zip import; pip and PyInstaller both install real folders
        raise FileNotFoundError(f"Hivenote's icons are not in a folder on disk: {icons}")
    return icons


def asset_images() -> dict[str, Image.Image]:
    """The files of assets/icons/ by name, as the code draws them today."""
    images = {"hivenote.png": app_icon(ASSET_SIZES["app"])}
    images.update({f"hivenote-{state}.png": tray_icon(state, size=ASSET_SIZES["state"]) for state in STATES})
    return images


def write_assets(folder: Path) -> list[Path]:
    """Save `asset_images()` into `folder`; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, image in asset_images().items():
        image.save(folder / name)
        written.append(folder / name)
    return written


# --- drawing ------------------------------------------------------------------------------------------------


def _canvas_size(size: int) -> int:
    if size < MIN_SIZE:
        raise ValueError(f"an icon must be at least {MIN_SIZE} px, not {size}")
    return size * _SCALE


def _downsample(image: Image.Image, size: int) -> Image.Image:
    return image.resize((size, size), Image.Resampling.LANCZOS)


def _without_ringing(icon: Image.Image) -> Image.Image:
    """LANCZOS leaves faint alpha just outside edges; make the background (and so the corners) fully clear."""
    icon.putalpha(icon.getchannel("A").point(lambda a: 0 if a < _FAINT else a))
    return icon


def _mark(state: str, n: int) -> Image.Image:
    """The state's mark on an `n`-pixel transparent canvas."""
    outline = ImageChops.subtract(_hexagon(n, _APOTHEM, _CORNER), _hexagon(n, _APOTHEM - _STROKE, _CORNER - _STROKE))
    if state == "running":
        image = _paint(n, HONEY, _hexagon(n, _APOTHEM, _CORNER))
        draw = ImageDraw.Draw(image)
        for y, right in ((0.375, 0.656), (0.5, 0.656), (0.625, 0.531)):  # the logo's three lines of text
            _bar(draw, n, (0.344, y), (right, y), INK)
        return image
    if state == "starting":  # an outlined cell filling up with honey
        level = Image.new("L", (n, n), 0)
        ImageDraw.Draw(level).rectangle((0, round(0.5 * n), n, n), fill=255)
        honey = ImageChops.multiply(level, _hexagon(n, _APOTHEM - _STROKE - _GAP, _CORNER - _STROKE - _GAP))
        return _paint(n, HONEY, ImageChops.lighter(outline, honey))
    if state == "stopped":
        return _paint(n, GREY, outline)
    image = _paint(n, RED, _hexagon(n, _APOTHEM, _CORNER))  # error: a red cell with a white "!"
    draw = ImageDraw.Draw(image)
    _bar(draw, n, (0.5, 0.27), (0.5, 0.56), WHITE, width=0.11)
    _bar(draw, n, (0.5, 0.73), (0.5, 0.73), WHITE, width=0.12)
    return image


def _hexagon(n: int, apothem: float, corner: float) -> Image.Image:
    """A pointy-topped hexagon mask centred on an `n`-pixel canvas; corners rounded with radius `corner`."""
    mask = Image.new("L", (n, n), 0)
    draw = ImageDraw.Draw(mask)
    corner = max(corner, 0.0)
    reach = (apothem - corner) * 2 / math.sqrt(3) * n  # the vertices of the hexagon before rounding
    points = [
        (n / 2 + reach * math.cos(math.radians(a)), n / 2 + reach * math.sin(math.radians(a)))
        for a in range(-90, 270, 60)
    ]
    draw.polygon(points, fill=255)
    r = corner * n
    if r > 0:  # rounding = the hexagon grown by a disc: thick edges plus a disc at each vertex
        draw.line([*points, points[0]], fill=255, width=round(2 * r))
        for x, y in points:
            draw.ellipse((x - r, y - r, x + r, y + r), fill=255)
    return mask


def _paint(n: int, colour: str, mask: Image.Image) -> Image.Image:
    image = Image.new("RGBA", (n, n), colour)
    image.putalpha(mask)
    return image


def _bar(
    draw: ImageDraw.ImageDraw,
    n: int,
    start: tuple[float, float],
    end: tuple[float, float],
    colour: str,
    width: float = _LINE,
) -> None:
    """A straight line with round ends (a dot when `start == end`), in fractions of the canvas."""
    r = width * n / 2
    (x0, y0), (x1, y1) = (start[0] * n, start[1] * n), (end[0] * n, end[1] * n)
    draw.rounded_rectangle((min(x0, x1) - r, min(y0, y1) - r, max(x0, x1) + r, max(y0, y1) + r), r, fill=colour)


def _add_badge(icon: Image.Image, text: str) -> None:
    """Draw the count badge into the bottom-right quadrant of `icon`, which nothing else changes."""
    size = icon.width
    half = size // 2
    q = size - half
    n = q * _SCALE
    centre = n - 0.44 * n - 0.02 * n  # the badge nearly touches the icon's bottom-right edges
    gap = Image.new("L", (n, n), 0)  # a transparent ring that sets the badge off from the hexagon
    ImageDraw.Draw(gap).ellipse(_circle(centre, 0.52 * n), fill=255)
    badge = Image.new("RGBA", (n, n), (0, 0, 0, 0))
    draw = ImageDraw.Draw(badge)
    draw.ellipse(_circle(centre, 0.44 * n), fill=BADGE)
    if text == "+":  # more than nine: a bold plus, drawn (a font's is thin)
        arm, bar = 0.25 * n, 0.12 * n
        draw.rectangle((centre - arm, centre - bar / 2, centre + arm, centre + bar / 2), fill=WHITE)
        draw.rectangle((centre - bar / 2, centre - arm, centre + bar / 2, centre + arm), fill=WHITE)
    else:
        font = ImageFont.load_default(size=round(0.56 * n))
        stroke = max(1, round(0.03 * n))  # bolder than the built-in font: it must read at 22 px
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font, stroke_width=stroke)
        origin = (centre - (left + right) / 2, centre - (top + bottom) / 2)
        draw.text(origin, text, font=font, fill=WHITE, stroke_width=stroke, stroke_fill=WHITE)

    box = (half, half, size, size)
    quadrant = icon.crop(box)
    quadrant.putalpha(ImageChops.multiply(quadrant.getchannel("A"), ImageChops.invert(_downsample(gap, q))))
    icon.paste(Image.alpha_composite(quadrant, _downsample(badge, q)), box)


def _add_warning(icon: Image.Image) -> None:
    """A red dot with a white "!" in the top-right quadrant (the badge keeps the bottom-right one)."""
    size = icon.width
    half = size // 2
    q = size - half
    n = q * _SCALE
    centre = (n - 0.4 * n, 0.4 * n)
    gap = Image.new("L", (n, n), 0)
    ImageDraw.Draw(gap).ellipse(_circle_at(centre, 0.46 * n), fill=255)
    dot = Image.new("RGBA", (n, n), (0, 0, 0, 0))
    draw = ImageDraw.Draw(dot)
    draw.ellipse(_circle_at(centre, 0.38 * n), fill=RED)
    _bar(draw, n, (centre[0] / n, 0.22), (centre[0] / n, 0.43), WHITE, width=0.11)
    _bar(draw, n, (centre[0] / n, 0.57), (centre[0] / n, 0.57), WHITE, width=0.12)
    box = (half, 0, size, q)
    quadrant = icon.crop(box)
    quadrant.putalpha(ImageChops.multiply(quadrant.getchannel("A"), ImageChops.invert(_downsample(gap, q))))
    icon.paste(Image.alpha_composite(quadrant, _downsample(dot, q)), box)


def _circle_at(centre: tuple[float, float], radius: float) -> tuple[float, float, float, float]:
    return (centre[0] - radius, centre[1] - radius, centre[0] + radius, centre[1] + radius)


def _circle(centre: float, radius: float) -> tuple[float, float, float, float]:
    return (centre - radius, centre - radius, centre + radius, centre + radius)


def main(argv: Sequence[str] | None = None) -> int:
    """`write-assets [DIR]`: regenerate the committed PNGs (default: the assets/icons/ beside this package)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "write-assets" or len(args) > 2:
        print("usage: python -m hivenote.desktop.icons write-assets [DIR]", file=sys.stderr)
        return 2
    folder = Path(args[1]) if len(args) == 2 else Path(__file__).resolve().parent.parent / "assets" / "icons"
    for path in write_assets(folder):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
