"""The lessons (`tinyad lesson N`), installed as tinyad.lesson_files."""
