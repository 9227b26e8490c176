"""CommerceML, the files 1C's standard «Обмен с сайтом» sends (contract 9a): a source.

``parse`` reads a file as a stream, safely; ``mapping`` turns offers into ``price`` rows;
``publish`` stages a package whole or not at all and keeps what catalogue files say.
"""
