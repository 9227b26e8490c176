from exchange.cli import main

main()
