if __name__ == "__main__":  # not when a reading process (spawn) imports it as __mp_main__
    from exchange.cli import main

    main()
