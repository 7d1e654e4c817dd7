"""The notebook's logic, pure: standard library only.

tests/test_architecture.py checks every module in this folder, new ones included.
"""
