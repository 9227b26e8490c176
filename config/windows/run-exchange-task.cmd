@echo off
rem One scheduled run of exchange: cycles until nothing is left to move, at most MAX seconds
rem (default 840 = 14 min, under the 15-minute interval, so runs never overlap). Registered by
rem install-scheduled-task.ps1; lives in the install folder (C:\exchange), next to venv\,
rem exchange.toml and logs\.
rem Exit codes (Task Scheduler, "Last Run Result"): 0 idle, done; 3 (0x3) time ran out with
rem work left, the next run goes on; 2 configuration or database problem: see the log.
setlocal
set "HERE=%~dp0"
set "MAX=%~1"
if "%MAX%"=="" set "MAX=840"
set "PYTHONUTF8=1"
set "PYTHONIOENCODING=utf-8"
set "LOG=%HERE%logs\exchange-task.log"
if not exist "%HERE%logs" mkdir "%HERE%logs"
rem Roll the log at 10 MB, keeping one previous file.
if exist "%LOG%" for %%F in ("%LOG%") do if %%~zF GTR 10485760 move /y "%LOG%" "%LOG%.1" >nul
echo ===== %DATE% %TIME% start (max %MAX% s) >> "%LOG%"
"%HERE%venv\Scripts\exchange.exe" --config "%HERE%exchange.toml" run --until-idle --max-seconds %MAX% >> "%LOG%" 2>&1
set "CODE=%ERRORLEVEL%"
echo ===== %DATE% %TIME% exit %CODE% >> "%LOG%"
exit /b %CODE%
