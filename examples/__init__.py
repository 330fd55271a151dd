"""The examples (`tinyad example NAME`), installed as tinyad.examples."""
