from rke_py.cli import main

main()
