"""PyInstaller's entry script for the frozen `hivenote` executable: the same launcher as the `hivenote` console
script (`hivenote.desktop.main:main`), which also dispatches `hivenote --window` to the window process."""

from hivenote.desktop.main import main

if __name__ == "__main__":
    raise SystemExit(main())
