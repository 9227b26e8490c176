<#
.SYNOPSIS
  Registers exchange as a scheduled task: `exchange run --until-idle --max-seconds 840` every
  15 minutes, for sites that prefer a task to a service (use one or the other, not both).

.DESCRIPTION
  Run in an elevated PowerShell from this folder (config\windows of the project), after
  exchange is installed in <InstallDir>\venv and <InstallDir>\exchange.toml is filled in
  (docs/deployment.md, "Windows"). The script:
    - copies run-exchange-task.cmd to <InstallDir> (it writes <InstallDir>\logs\exchange-task.log);
    - gives the task's account write access to <InstallDir>\data and <InstallDir>\logs;
    - registers the task: a run every <IntervalMinutes> minutes from now on, no second copy
      while one runs, killed after <IntervalMinutes> + 5 minutes should it hang.
  Run it again to change the settings: the task is replaced.

.PARAMETER Credential
  The account the task runs as (a dedicated local user such as .\exchange is best). Without
  it the task runs as NT AUTHORITY\NETWORK SERVICE.

.EXAMPLE
  .\install-scheduled-task.ps1
  .\install-scheduled-task.ps1 -InstallDir D:\exchange -Credential (Get-Credential .\exchange)
  Start-ScheduledTask -TaskName exchange           # a run now
  Get-ScheduledTaskInfo -TaskName exchange         # LastRunTime, LastTaskResult (0 or 3: fine)
  Disable-ScheduledTask -TaskName exchange         # pause: the run in progress finishes
  Unregister-ScheduledTask -TaskName exchange -Confirm:$false
#>
[CmdletBinding()]
param(
    [string] $InstallDir = 'C:\exchange',
    [string] $TaskName = 'exchange',
    [ValidateRange(1, 1440)] [int] $IntervalMinutes = 15,
    [ValidateRange(1, 86400)] [int] $MaxSeconds = 840,
    [pscredential] $Credential
)
Set-StrictMode -Version Latest
$ErrorActionPreference = 'Stop'

$exe = Join-Path $InstallDir 'venv\Scripts\exchange.exe'
$config = Join-Path $InstallDir 'exchange.toml'
foreach ($required in @($exe, $config)) {
    if (-not (Test-Path -LiteralPath $required)) {
        throw "Not found: $required. Install exchange first (docs/deployment.md, 'Windows')."
    }
}
if ($MaxSeconds -ge $IntervalMinutes * 60) {
    Write-Warning "MaxSeconds ($MaxSeconds) is not below the interval ($IntervalMinutes min): a run that uses all its time makes the task skip the next start."
}

$wrapper = Join-Path $InstallDir 'run-exchange-task.cmd'
Copy-Item -LiteralPath (Join-Path $PSScriptRoot 'run-exchange-task.cmd') -Destination $wrapper -Force
foreach ($dir in @('data', 'data\reports', 'logs')) {
    New-Item -ItemType Directory -Force -Path (Join-Path $InstallDir $dir) | Out-Null
}

if ($Credential) { $account = $Credential.UserName } else { $account = 'NT AUTHORITY\NETWORK SERVICE' }
foreach ($dir in @('data', 'logs')) {
    # Modify, inherited by files and subfolders: the SQLite file, its journal, the reports, the log.
    & icacls.exe (Join-Path $InstallDir $dir) /grant "${account}:(OI)(CI)M" /T /Q | Out-Null
    if ($LASTEXITCODE -ne 0) { throw "icacls failed for $dir (exit $LASTEXITCODE)" }
}

$action = New-ScheduledTaskAction -Execute $wrapper -Argument "$MaxSeconds" -WorkingDirectory (Join-Path $InstallDir 'data')
$trigger = New-ScheduledTaskTrigger -Once -At (Get-Date).AddMinutes(1) `
    -RepetitionInterval (New-TimeSpan -Minutes $IntervalMinutes)
$settings = New-ScheduledTaskSettingsSet `
    -MultipleInstances IgnoreNew `
    -ExecutionTimeLimit (New-TimeSpan -Minutes ($IntervalMinutes + 5)) `
    -StartWhenAvailable `
    -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries `
    -RestartCount 3 -RestartInterval (New-TimeSpan -Minutes 1)
$description = "exchange: prices and postings from 1C to the shop. Runs 'exchange run --until-idle --max-seconds $MaxSeconds' every $IntervalMinutes min. Log: $InstallDir\logs\exchange-task.log"

if (Get-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue) {
    Unregister-ScheduledTask -TaskName $TaskName -Confirm:$false
}
if ($Credential) {
    Register-ScheduledTask -TaskName $TaskName -Description $description `
        -Action $action -Trigger $trigger -Settings $settings -RunLevel Limited `
        -User $Credential.UserName -Password $Credential.GetNetworkCredential().Password | Out-Null
} else {
    $principal = New-ScheduledTaskPrincipal -UserId 'NT AUTHORITY\NETWORK SERVICE' -LogonType ServiceAccount -RunLevel Limited
    Register-ScheduledTask -TaskName $TaskName -Description $description `
        -Action $action -Trigger $trigger -Settings $settings -Principal $principal | Out-Null
}

Write-Host "Registered task '$TaskName' as ${account}: every $IntervalMinutes min, at most $MaxSeconds s a run."
Write-Host "Log: $InstallDir\logs\exchange-task.log   Run now: Start-ScheduledTask -TaskName $TaskName"
