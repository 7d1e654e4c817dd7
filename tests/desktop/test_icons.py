"""The icons as drawn: size and transparency, a shape per state, the agents badge, and the committed PNGs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from hivenote.desktop.icons import STATES, app_icon, asset_images, assets_dir, main, tray_icon

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets" / "icons"
REGENERATE = "python -m hivenote.desktop.icons write-assets"


def same(a: Image.Image, b: Image.Image) -> bool:
    """Pixel-equal, colour included (getbbox on RGBA looks only at alpha unless told otherwise)."""
    return a.mode == b.mode and a.size == b.size and ImageChops.difference(a, b).getbbox(alpha_only=False) is None


def alpha(icon: Image.Image, x: float, y: float) -> int:
    """The alpha at a point given as fractions of the icon's width and height."""
    value = icon.getpixel((int(x * icon.width), int(y * icon.height)))
    assert isinstance(value, tuple)
    return int(value[3])


def grey(icon: Image.Image) -> Image.Image:
    """The icon as a colour-blind or monochrome panel shows it: luminance over a mid-grey background."""
    background = Image.new("RGBA", icon.size, (128, 128, 128, 255))
    return Image.alpha_composite(background, icon).convert("L")


@pytest.mark.parametrize("size", [16, 22, 64, 128])
@pytest.mark.parametrize("state", STATES)
def test_every_state_is_an_rgba_square_of_the_asked_size_with_transparent_corners(state: str, size: int) -> None:
    for agents in (0, 3, 12):
        icon = tray_icon(state, agents, size)
        assert icon.mode == "RGBA" and icon.size == (size, size)
        corners = [(0, 0), (size - 1, 0), (0, size - 1), (size - 1, size - 1)]
        assert [icon.getchannel("A").getpixel(corner) for corner in corners] == [0, 0, 0, 0]


def test_the_tray_icon_is_64_px_unless_asked_otherwise() -> None:
    assert tray_icon("running").size == (64, 64)


def test_icons_under_16_px_unknown_states_and_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 16 px"):
        tray_icon("running", size=15)
    with pytest.raises(ValueError, match="at least 16 px"):
        app_icon(8)
    with pytest.raises(ValueError, match="unknown tray state 'busy'; expected one of running, starting"):
        tray_icon("busy")
    with pytest.raises(ValueError, match="cannot be negative"):
        tray_icon("running", -1)


def test_stopped_is_hollow_starting_is_half_full_and_running_and_error_are_solid() -> None:
    stopped, starting, running, error = (tray_icon(state) for state in ("stopped", "starting", "running", "error"))
    assert alpha(stopped, 0.5, 0.5) == 0
    assert alpha(stopped, 0.5, 0.08) == 255  # the outline
    assert (alpha(starting, 0.5, 0.3), alpha(starting, 0.5, 0.7)) == (0, 255)
    assert alpha(running, 0.5, 0.5) == 255 and alpha(error, 0.5, 0.5) == 255


def test_each_state_looks_different_without_colour() -> None:
    for a, b in itertools.combinations(STATES, 2):
        difference = ImageChops.difference(grey(tray_icon(a)), grey(tray_icon(b)))
        changed = sum(difference.histogram()[41:])
        assert changed > 0.05 * 64 * 64, f"{a} and {b} look alike in greyscale"


def test_the_app_icon_is_the_running_mark_at_any_size() -> None:
    assert same(app_icon(64), tray_icon("running", size=64))
    for size in (16, 24, 32, 48, 128, 256, 512):
        icon = app_icon(size)
        assert icon.mode == "RGBA" and icon.size == (size, size)
        assert alpha(icon, 0, 0) == 0 and alpha(icon, 0.5, 0.5) == 255


@pytest.mark.parametrize("size", [64, 65, 128])
def test_the_badge_only_changes_the_bottom_right_quadrant(size: int) -> None:
    plain = tray_icon("running", size=size)
    half = size // 2
    for agents in (1, 2, 9, 10):
        box = ImageChops.difference(plain, tray_icon("running", agents, size)).getbbox(alpha_only=False)
        assert box is not None, f"no badge for {agents}"
        assert box[0] >= half and box[1] >= half, f"the badge for {agents} reaches {box}"


def test_the_badge_reads_at_22_px_as_panels_show_it() -> None:
    """A panel scales the icon to 22-24 px: each count's glyph (1-9, then "+") keeps solid white pixels there; the
    thin two-glyph "9+" and thin digits blurred into the blue (1-3 such pixels)."""
    for agents in range(1, 11):
        small = tray_icon("running", agents).resize((22, 22), Image.Resampling.LANCZOS).convert("RGBA")
        quadrant = small.crop((11, 11, 22, 22))
        pixels = [px for px in quadrant.get_flattened_data() if isinstance(px, tuple)]
        solid = [px for px in pixels if px[3] > 200 and min(px[:3]) >= 190]
        assert len(solid) >= 4, f"the badge for {agents} has {len(solid)} solid white pixels at 22 px"


def test_the_badge_shows_one_to_nine_then_plus() -> None:
    badges = {agents: tray_icon("running", agents) for agents in (1, 2, 9, 10, 99, 1000)}
    for a, b in itertools.combinations((1, 2, 9, 10), 2):
        assert not same(badges[a], badges[b]), f"{a} and {b} agents look the same"
    assert same(badges[10], badges[99]) and same(badges[10], badges[1000])


def test_only_a_running_server_shows_the_badge() -> None:
    for state in ("starting", "stopped", "error"):
        assert same(tray_icon(state, 4), tray_icon(state))
    assert same(tray_icon("running", 0), tray_icon("running"))


@pytest.mark.parametrize("size", [64, 65, 128])
def test_a_sync_warning_only_changes_the_top_right_quadrant_and_only_while_running(size: int) -> None:
    for agents in (0, 3):
        plain = tray_icon("running", agents, size)
        box = ImageChops.difference(plain, tray_icon("running", agents, size, warning=True)).getbbox(alpha_only=False)
        assert box is not None and box[0] >= size // 2 and box[3] <= size - size // 2, box
    for state in ("starting", "stopped", "error"):
        assert same(tray_icon(state, warning=True), tray_icon(state))


def test_the_committed_pngs_are_what_the_code_draws() -> None:
    drawn = asset_images()
    assert {path.name for path in ASSETS.glob("*.png")} == set(drawn)
    for name, image in drawn.items():
        with Image.open(ASSETS / name) as committed:
            committed.load()
            assert same(committed, image), (
                f"assets/icons/{name} is stale: run python -m hivenote.desktop.icons write-assets"
            )
    assert drawn["hivenote.png"].size == (256, 256)
    assert {image.size for name, image in drawn.items() if name != "hivenote.png"} == {(64, 64)}


def test_the_installed_icons_are_the_committed_ones() -> None:
    installed = assets_dir()
    for name in asset_images():
        assert (installed / name).read_bytes() == (ASSETS / name).read_bytes()


def test_write_assets_saves_every_png_into_the_folder_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "icons"
    assert main(["write-assets", str(folder)]) == 0
    assert sorted(path.name for path in folder.iterdir()) == sorted(asset_images())
    assert capsys.readouterr().out.split() == [str(folder / name) for name in asset_images()]
    for name, image in asset_images().items():
        with Image.open(folder / name) as written:
            written.load()
            assert same(written, image)


def test_the_command_line_explains_itself_when_misused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["write"], ["write-assets", "a", "b"]):
        assert main(argv) == 2
        assert "usage: python -m hivenote.desktop.icons write-assets [DIR]" in capsys.readouterr().err
